"""The situation reaches the planner everywhere: `--features` / `--features-json` on `plan` and `costs`, and
`features` / `explore` on the HTTP (and so MCP) plan request; bad input is exit 2 with a message; an old
pickled model is refused with what to do."""

from __future__ import annotations

import contextlib
import json
import pickle

import pytest
from support import trained_store

from domains.bundled import bundled_task, write_instance
from domains.validate import validate_plan
from portfolio.cli import main
from traces.records import StepRecord
from traces.store import TraceStore

RISKY = "(web-search job1 competitors web-basic)"
ARGS = ("job1", "competitors", "web-basic")  # RISKY's


@pytest.fixture(scope="module")
def peak_store(tmp_path_factory):
    """The cheap engine fails 9 times in 10 at peak hours and never off-peak."""
    runs = (
        (f"r{i}-{hour}", ARGS, "failure" if hour == "peak" and i % 10 else "success", {"hour": hour})
        for i in range(80)
        for hour in ("peak", "off-peak")
    )
    return trained_store(tmp_path_factory.mktemp("features") / "traces.db", "web-search", runs)


def costs_rows(capsys, *args) -> dict[str, dict]:
    assert main(["costs", *args, "--json"]) == 0
    return {row["action"]: row for row in json.loads(capsys.readouterr().out)}


def test_costs_and_plan_take_the_situation(peak_store, tmp_path, capsys):
    domain, problem = map(str, write_instance("tools", 1, 0, tmp_path))
    peak = costs_rows(capsys, domain, problem, "--traces", str(peak_store), "--features", "hour=peak")
    off = costs_rows(capsys, domain, problem, "--traces", str(peak_store), "--features", "hour=off-peak")
    assert set(peak[RISKY]) == {  # the fields `costs --json` keeps
        "action", "base_cost", "p_fail", "cost", "charge", "p_fail_90",
        "steps", "failures", "since_change", "failures_since", "runs_ago", "last_seen", "shared_change",
    }  # fmt: skip
    assert peak[RISKY]["p_fail"] > 0.7 and off[RISKY]["p_fail"] < 0.1
    situation = tmp_path / "peak.json"
    situation.write_text('{"hour": "peak"}')
    from_file = costs_rows(capsys, domain, problem, "--traces", str(peak_store), "--features-json", str(situation))
    assert from_file[RISKY]["p_fail"] == peak[RISKY]["p_fail"]

    plans = {}
    for hour in ("peak", "off-peak"):
        assert (
            main(
                [
                    "plan",
                    domain,
                    problem,
                    "--traces",
                    str(peak_store),
                    "--features",
                    f"hour={hour}",
                    "--explore",
                    "cautious",
                    "--delegates",
                    "fast-downward,pyperplan",
                    "--budget",
                    "10",
                    "--json",
                ]
            )
            == 0
        )
        plans[hour] = json.loads(capsys.readouterr().out)["plan"]
    assert RISKY not in plans["peak"] and RISKY in plans["off-peak"]  # off-peak the cheap engine is fine


@pytest.mark.parametrize(
    "args, message",
    [
        (["--features", "hour"], "expected KEY=VALUE"),
        (["--features-json", "missing.json"], "cannot read"),
        (["--explore", "greedy"], None),  # argparse's own message, exit 2
    ],
)
def test_bad_situation_input_is_exit_2(tmp_path, capsys, args, message):
    domain, problem = map(str, write_instance("tools", 1, 0, tmp_path))
    with pytest.raises(SystemExit) if message is None else contextlib.nullcontext():
        assert main(["plan", domain, problem, *args]) == 2
    if message is not None:
        assert message in capsys.readouterr().err
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('["not", "an", "object"]')
    assert main(["costs", domain, problem, "--traces", str(tmp_path / "t.db"), "--features-json", str(bad_json)]) == 2
    assert "expected a JSON object" in capsys.readouterr().err


def test_http_plan_request_passes_features_and_explore(peak_store):
    import httpx
    from test_service_helpers import config, serve_in_thread

    task = bundled_task("tools", 1, 0)
    body = {"domain": task.domain_pddl, "problem": task.problem_pddl, "explore": "cautious", "budget": 10}
    service = config(traces=str(peak_store), delegates=["fast-downward", "pyperplan"], max_budget_s=10.0)
    with serve_in_thread(service) as (url, _):
        peak = httpx.post(f"{url}/v1/plan", json=body | {"features": {"hour": "peak"}}, timeout=60).json()
        off = httpx.post(f"{url}/v1/plan", json=body | {"features": {"hour": "off-peak"}}, timeout=60).json()
        bad = httpx.post(f"{url}/v1/plan", json=body | {"explore": "greedy"}, timeout=60)
    assert RISKY not in peak["plan"] and RISKY in off["plan"]
    assert validate_plan(task, [planner_step(s) for s in peak["plan"]]).ok
    assert bad.status_code == 400 and "explore" in bad.text and "optimistic" in bad.text


def planner_step(text: str):
    from domains.ground_text import parse_ground_action

    return parse_ground_action(text)


def test_a_pickled_model_is_refused_with_the_fix(tmp_path, capsys):
    path = tmp_path / "old.db"
    with TraceStore(path) as store:
        store.save_model(pickle.dumps({"a": "model"}), {"format": "portfolio-planner/failure-model/1"}, {})
    domain, problem = map(str, write_instance("tools", 1, 0, tmp_path))
    assert main(["costs", domain, problem, "--traces", str(path)]) == 2
    err = capsys.readouterr().err
    assert "pickle" in err and "portfolio retrain" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args", [["--weight", "2"], ["--explore", "thompson"], ["--objective", "time"], ["--features", "hour=peak"]]
)
def test_an_option_of_learned_costs_without_a_trace_store_is_exit_2_not_ignored(tmp_path, capsys, monkeypatch, args):
    """`plan --weight 2` (or --explore, --objective, --features) without --traces planned as if it were not
    there, exit 0: the user asked for learned costs and got none without a word."""
    monkeypatch.delenv("PORTFOLIO_TRACES", raising=False)
    domain, problem = map(str, write_instance("tools", 1, 0, tmp_path))
    assert main(["plan", domain, problem, *args]) == 2
    err = capsys.readouterr().err
    assert args[0] in err and "--traces PATH" in err and "Traceback" not in err


def test_retrain_and_costs_work_on_a_tenants_model(tmp_path, capsys):
    """`--tenant` chooses whose steps a model is fit on and whose model prices; the default tenant's (the CLI's
    own steps) is what the commands use without it, and `--all-tenants` fits each that recorded steps since."""
    path = tmp_path / "t.db"
    with TraceStore(path) as store:
        store.record_steps(
            StepRecord(run_id=f"{prefix}r{i}", step=0, action="web-search", args=RISKY[1:-1].split()[1:],
                       outcome="failure" if prefix else "success")
            for i in range(40) for prefix in ("", "@acme/")
        )  # fmt: skip
    domain, problem = map(str, write_instance("tools", 1, 0, tmp_path))
    assert main(["retrain", "--traces", str(path), "--tenant", "acme"]) == 0
    assert capsys.readouterr().out.startswith("tenant acme: model version 1: 40 steps")
    assert main(["costs", domain, problem, "--traces", str(path)]) == 2  # the default tenant has no model yet
    assert "no trained model yet" in capsys.readouterr().err
    assert main(["retrain", "--traces", str(path), "--all-tenants"]) == 0
    out = capsys.readouterr().out
    assert "tenant acme: model version 1 stands: no step recorded since" in out
    assert "tenant default: model version 2: 40 steps" in out
    with TraceStore(path) as store:
        store.record_steps([StepRecord(run_id="@acme/more", step=0, action="web-search", outcome="failure")])
    assert main(["retrain", "--traces", str(path), "--all-tenants"]) == 0  # only acme recorded a step since
    out = capsys.readouterr().out
    assert "tenant acme: model version 3: 41 steps" in out and "tenant default: model version 2 stands" in out
    acme = costs_rows(capsys, domain, problem, "--traces", str(path), "--tenant", "acme")
    default = costs_rows(capsys, domain, problem, "--traces", str(path))
    assert acme[RISKY]["p_fail"] > 0.9 and default[RISKY]["p_fail"] < 0.1
    assert acme[RISKY]["steps"] == default[RISKY]["steps"] == 40  # the step since is of another grounding
    assert main(["costs", domain, problem, "--traces", str(path), "--pooled"]) == 2
    assert "no trained model pooled over every tenant yet" in capsys.readouterr().err
    assert main(["retrain", "--traces", str(path), "--pooled"]) == 0
    assert capsys.readouterr().out.startswith("pooled model: model version 4: 81 steps")
    pooled = costs_rows(capsys, domain, problem, "--traces", str(path), "--pooled")
    assert pooled[RISKY]["steps"] == 80 and 0.2 < pooled[RISKY]["p_fail"] < 0.8
    assert main(["costs", domain, problem, "--traces", str(path), "--tenant", "zeta"]) == 2
    assert "no trained model of tenant 'zeta' yet" in capsys.readouterr().err
    plans = {}
    for tenant in ("acme", "zeta"):
        assert main(["plan", domain, problem, "--traces", str(path), "--tenant", tenant, "--json"]) == 0
        plans[tenant] = json.loads(capsys.readouterr().out)
    assert plans["acme"]["cost_model"].startswith("learned:") and RISKY not in plans["acme"]["plan"]
    assert plans["zeta"]["cost_model"] == "task" and RISKY in plans["zeta"]["plan"]  # no model: the task's costs
    with pytest.raises(SystemExit) as bad:
        main(["costs", domain, problem, "--traces", str(path), "--tenant", "Not A Tenant"])
    assert bad.value.code == 2 and "expected a tenant's name" in capsys.readouterr().err
