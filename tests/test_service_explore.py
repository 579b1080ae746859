"""`portfolio serve --explore`: the server's default exploration policy for learned costs, over real HTTP (uvicorn
on a loopback port, real planner workers, a real SQLite store with a trained model). A request's own `explore`
field wins; /v1/replan passes its `explore` on too. Which policy planned is visible in the result's `cost_model`
("learned:<generation>:<policy>:<situation>"; None under Thompson sampling, whose costs are drawn per call)."""

from __future__ import annotations

import httpx
import pytest
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, serve_in_thread, small_plan, validated


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from learning.retrain import retrain
    from traces.records import StepRecord
    from traces.store import TraceStore

    traces = str(tmp_path_factory.mktemp("explore") / "traces.db")
    with TraceStore(traces) as store:  # a model to plan with: blocks steps, pick-up failing now and then
        store.record_steps(
            [
                StepRecord(
                    run_id="seed", step=i, action="pick-up", args=("a",), outcome="failure" if i % 4 == 0 else "success"
                )
                for i in range(40)
            ]
        )
        retrain(store, holdout_fraction=0.0)
    with serve_in_thread(config(traces=traces, explore="optimistic")) as (url, svc):
        with httpx.Client(base_url=url, timeout=60) as client:
            yield client


def policy(result: dict) -> str | None:
    assert result["status"] == "solved" and validated(BLOCKS_DOMAIN, BLOCKS_4, result["plan"])
    return None if result["cost_model"] is None else result["cost_model"].split(":")[2]


def test_the_servers_default_applies_when_a_request_does_not_say(service):
    assert policy(service.post("/v1/plan", json=small_plan()).json()) == "optimistic"


@pytest.mark.parametrize(
    "explore, planned", [("cautious", "cautious"), ("optimistic", "optimistic"), ("mean", "cautious")]
)
def test_a_requests_own_explore_wins(service, explore, planned):
    """An old name (`mean`) is still accepted and plans under the policy it stands for."""
    assert policy(service.post("/v1/plan", json={**small_plan(), "explore": explore}).json()) == planned


def test_thompson_draws_fresh_costs_per_call(service):
    assert policy(service.post("/v1/plan", json={**small_plan(), "explore": "thompson"}).json()) is None


def test_replan_passes_its_explore_on(service):
    first = service.post("/v1/plan", json=small_plan()).json()
    state = [
        "(clear a)",
        "(on a b)",
        "(ontable b)",
        "(clear c)",
        "(ontable c)",
        "(clear d)",
        "(ontable d)",
        "(handempty)",
    ]
    again = service.post("/v1/replan", json={"run_id": first["run_id"], "state": state, "explore": "cautious"}).json()
    assert again["status"] == "solved" and again["cost_model"].split(":")[2] == "cautious"


def test_the_cli_flag_sets_the_config_and_a_bad_policy_exits_2(capsys):
    from portfolio.cli import build_parser, main
    from portfolio.commands.serve_cmd import service_config

    args = build_parser().parse_args(["serve", "--explore", "thompson", "--workers", "1"])
    assert service_config(args).explore == "thompson"
    assert service_config(build_parser().parse_args(["serve", "--workers", "1"])).explore is None
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--port", "0", "--explore", "greedy"])
    assert exit_.value.code == 2 and "invalid choice: 'greedy'" in capsys.readouterr().err


def fd_details(result: dict) -> dict:
    return next(a["details"] for a in result["attempts"] if a["delegate"] in ("fast-downward", "fd-inprocess"))


def test_quality_and_weight_per_request_and_the_servers_default(service):
    default = service.post("/v1/plan", json=small_plan()).json()
    assert policy(default) == "optimistic" and fd_details(default)["quality"] == "anytime"
    first = service.post("/v1/plan", json={**small_plan(), "quality": "first", "weight": 2}).json()
    assert policy(first) == "optimistic" and fd_details(first)["quality"] == "first"
    assert first["cost_model"].endswith(":w2") and not default["cost_model"].endswith(":w2")
    assert first["learned_cost"] < default["learned_cost"]  # the same 6 steps, risk priced at 2 instead of 5
    for bad in ({"quality": "best"}, {"weight": -1}, {"weight": "heavy"}):
        answer = service.post("/v1/plan", json={**small_plan(), **bad})
        assert answer.status_code == 400, (bad, answer.text)


def test_the_cli_sets_the_servers_quality_and_weight():
    from portfolio.cli import build_parser
    from portfolio.commands.serve_cmd import service_config

    config_ = service_config(build_parser().parse_args(["serve", "--quality", "first", "--weight", "2.5"]))
    assert config_.quality == "first" and config_.weight == 2.5
