"""The explore policies go by names that say what they price at: `cautious` (the default), `thompson` and
`optimistic`, on every interface (`learning.explore`, `Planner`, the CLI, the HTTP/MCP request models, the server's
configuration). The old names `mean` and `ucb` are still accepted: they map to `cautious` and `optimistic` with a
warning, logged once per process, and every error lists only the new names."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

import learning.explore as explore
from domains.load import load_task
from learning.explore import ALIASES, DEFAULT_EXPLORE, EXPLORE_POLICIES, check_explore, renamed
from portfolio import Planner
from portfolio.cli import build_parser

BLOCKS = Path(__file__).parent / "data" / "ipc" / "blocks"


@pytest.fixture
def fresh_warnings(monkeypatch):
    """As in a new process: no old name warned about yet."""
    monkeypatch.setattr(explore, "_warned", set())


def test_the_policies_are_named_for_what_they_do():
    assert EXPLORE_POLICIES == ("cautious", "thompson", "optimistic") and DEFAULT_EXPLORE == "cautious"
    assert ALIASES == {"mean": "cautious", "ucb": "optimistic"}
    assert [check_explore(name) for name in EXPLORE_POLICIES] == list(EXPLORE_POLICIES)


def test_an_old_name_maps_to_its_policy_with_a_warning_logged_once(fresh_warnings, caplog):
    caplog.set_level(logging.WARNING, logger="learning.explore")
    with pytest.warns(DeprecationWarning, match="'mean' is now called 'cautious'"):
        assert check_explore("mean") == "cautious"
    with pytest.warns(DeprecationWarning, match="'ucb' is now called 'optimistic'"):
        assert check_explore("ucb") == "optimistic"
    with pytest.warns(DeprecationWarning):
        assert check_explore("mean") == "cautious"  # again: mapped, but not logged again
    logged = [r.getMessage() for r in caplog.records if r.name == "learning.explore"]
    assert logged == [
        "explore policy 'mean' is now called 'cautious'; the old name will be removed",
        "explore policy 'ucb' is now called 'optimistic'; the old name will be removed",
    ]


def test_a_new_name_passes_without_a_warning(fresh_warnings, caplog, recwarn):
    caplog.set_level(logging.WARNING, logger="learning.explore")
    assert renamed("cautious") == "cautious" and renamed("greedy") == "greedy"  # unknown: for the caller to reject
    assert not caplog.records and not [w for w in recwarn if w.category is DeprecationWarning]


def test_an_unknown_name_lists_the_three_policies():
    expected = r"unknown explore policy 'greedy'; expected one of: cautious, thompson, optimistic$"
    with pytest.raises(ValueError, match=expected):
        check_explore("greedy")


def test_the_old_names_price_as_the_new_ones():
    import numpy as np

    from learning.explore import explore_p_fail

    mean, concentration = np.array([0.2, 0.3]), np.array([20.0, 5.0])
    for old, new in ALIASES.items():
        assert np.array_equal(explore_p_fail(mean, concentration, old), explore_p_fail(mean, concentration, new))


@pytest.mark.parametrize("flag, policy", [("cautious", "cautious"), ("thompson", "thompson"), ("ucb", "optimistic")])
@pytest.mark.parametrize("command", ["plan", "serve"])
def test_the_cli_takes_the_new_names_and_maps_the_old(command, flag, policy):
    assert build_parser().parse_args([command, "--explore", flag]).explore == policy


def test_the_cli_help_and_errors_show_the_new_names(capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["plan", "--help"])
    assert "--explore {cautious,thompson,optimistic}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["plan", "--explore", "greedy"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "invalid choice: 'greedy' (choose from 'cautious', 'thompson', 'optimistic')" in err


def test_the_request_models_and_the_server_config_take_the_new_names_and_map_the_old():
    from test_service_helpers import config

    from portfolio.serve.models import PlanArgs, ReplanArgs

    assert PlanArgs(domain="d", problem="p", explore="optimistic").explore == "optimistic"
    assert PlanArgs(domain="d", problem="p", explore="mean").explore == "cautious"
    assert ReplanArgs(run_id="r", state=[], explore="ucb").explore == "optimistic"
    assert config(explore="mean").explore == "cautious"
    schema = PlanArgs.model_json_schema()["properties"]["explore"]
    assert {"enum": ["cautious", "thompson", "optimistic"], "type": "string"} in schema["anyOf"]
    with pytest.raises(ValidationError, match="'cautious', 'thompson' or 'optimistic'"):
        PlanArgs(domain="d", problem="p", explore="greedy")


def test_the_planner_plans_under_the_policy_an_old_name_stands_for(tmp_path):
    from learning.retrain import retrain
    from traces.records import StepRecord
    from traces.store import TraceStore

    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        store.record_steps(
            StepRecord(run_id="seed", step=i, action="pick-up", args=("a",), outcome="failure" if i % 4 else "success")
            for i in range(40)
        )
        retrain(store, holdout_fraction=0.0)
    task = load_task(BLOCKS / "domain.pddl", BLOCKS / "probBLOCKS-4-0.pddl")
    with pytest.raises(ValueError, match="expected one of: cautious, thompson, optimistic"):
        Planner(["pyperplan"], explore="greedy")
    with Planner(["pyperplan"], traces=store_path, explore="ucb") as planner:
        assert planner.explore == "optimistic"
        for asked, policy in ((None, "optimistic"), ("cautious", "cautious"), ("mean", "cautious")):
            result = planner.plan(task, explore=asked)
            assert result.solved and result.cost_model.split(":")[2] == policy, result.cost_model
