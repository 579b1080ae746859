"""The `time` objective (`learning.objective`): a quick tool that fails transiently beats a slow solid one, on
`costs`, `plan`, HTTP and `Agent`; `risk` stays as it was; a misspelled objective is a clear error."""

from __future__ import annotations

import json

import numpy as np
import pytest

from domains.bundled import bundled_task, write_instance
from domains.ground_text import parse_ground_action
from domains.validate import validate_plan
from learning import retrain
from learning.objective import ObjectiveError, TimeParams, expected_ms, retry_p_fail, split_retries
from portfolio.cli import main
from traces.records import StepRecord
from traces.store import TraceStore

WEB = "(web-search job1 competitors web-basic)"
DB = "(query-database job1 competitors db-internal)"


def test_expected_ms_counts_retries_replans_and_side_effects():
    one = np.ones(1)
    # 100 ms, fails 40% transiently (each failure 100 ms too), two retries, no replan penalty
    assert expected_ms(0.4 * one, 100 * one, 100 * one, one, 0 * one, 2, 0.0, 0.0)[0] == pytest.approx(156.0)
    # unbounded retries tend to 1 / (1 - p)
    assert expected_ms(0.4 * one, 100 * one, 100 * one, one, 0 * one, 60, 0.0, 0.0)[0] == pytest.approx(166.667, 1e-3)
    # no retries: a failure ends the plan, costing the replan
    assert expected_ms(0.4 * one, 100 * one, 100 * one, one, 0 * one, 0, 1000.0, 0.0)[0] == pytest.approx(500.0)
    # a side-effect failure (never retried) costs `side_effect_weight` replans more
    plain = expected_ms(0.4 * one, 100 * one, 100 * one, 0 * one, 0 * one, 2, 1000.0, 2.0)[0]
    dirty = expected_ms(0.4 * one, 100 * one, 100 * one, 0 * one, one, 2, 1000.0, 2.0)[0]
    assert plain == pytest.approx(500.0) and dirty == pytest.approx(500.0 + 2 * 0.4 * 1000.0)
    # a service that stays down: every retry fails, so retries only add their time before the replan
    down = expected_ms(0.4 * one, 100 * one, 100 * one, one, 0 * one, 2, 1000.0, 0.0, one)[0]
    assert down == pytest.approx(0.6 * 100 + 0.4 * 300 + 0.4 * 1000)
    assert retry_p_fail(0.1 * one, 30 * one, 30 * one)[0] > 0.7 > retry_p_fail(0.1 * one, 0 * one, 0 * one)[0]
    # 100 attempts, 54 failed, 30 of them retries of which 28 failed: first attempts fail 26 of 70
    first, again = split_retries(0.54 * one, 100 * one, 30 * one, 28 * one)
    assert first[0] == pytest.approx(26 / 70) and again[0] == pytest.approx((28 + 10 * 26 / 70) / 40)
    assert split_retries(0.2 * one, 0 * one, 0 * one, 0 * one)[0][0] == pytest.approx(0.2)  # nothing seen: as is
    with pytest.raises(ObjectiveError, match="side_effect_weight"):
        TimeParams(side_effect_weight=-1)


def steps() -> list[StepRecord]:
    """The tools world's cheap web route (web-basic) answers in 100 ms but fails 60% of the time with a
    transient error; the database route takes 2 s per call and never fails."""
    rng = np.random.default_rng(3)
    out = []
    for run in range(60):
        web = []
        while True:
            failed = rng.random() < 0.6
            web.append(("web-search", ("job1", "competitors", "web-basic"), failed, 100.0))
            if not failed or len(web) == 3:
                break
        route = web + [("fact-check", ("job1",), False, 100.0)]
        if run % 2:
            route = [
                ("connect-database", ("db-internal",), False, 2000.0),
                ("query-database", ("job1", "competitors", "db-internal"), False, 2000.0),
            ]
        route.append(("write-report", ("job1", "writer-small"), False, 100.0))
        out.extend(
            StepRecord(
                run_id=f"r{run}",
                step=i,
                action=name,
                args=args,
                outcome="failure" if failed else "success",
                duration_ms=ms,
                failure_category="transient" if failed else None,
                side_effects=False if failed else None,
            )  # fmt: skip
            for i, (name, args, failed, ms) in enumerate(route)
        )
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("objective") / "traces.db"
    with TraceStore(path) as opened:
        opened.record_steps(steps())
        retrain(opened)
    return path


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    return tuple(map(str, write_instance("tools", 1, 0, tmp_path_factory.mktemp("tools"))))


def costs_json(capsys, *args) -> dict[str, dict]:
    assert main(["costs", *args, "--json"]) == 0
    return {row["action"]: row for row in json.loads(capsys.readouterr().out)}


def test_costs_objective_time_adds_expected_ms_and_risk_keeps_its_fields(store, instance, capsys):
    risk = costs_json(capsys, *instance, "--traces", str(store))
    same = costs_json(capsys, *instance, "--traces", str(store), "--objective", "risk")
    time = costs_json(capsys, *instance, "--traces", str(store), "--objective", "time", "--replan-ms", "1000")
    described = {
        "charge", "p_fail_90", "steps", "failures", "since_change", "failures_since", "runs_ago", "last_seen",
        "shared_change",
    }  # fmt: skip
    assert risk == same and set(risk[WEB]) == {"action", "base_cost", "p_fail", "cost"} | described
    assert set(time[WEB]) == {"action", "base_cost", "p_fail", "cost", "expected_ms"} | described
    assert risk[WEB]["cost"] > risk[DB]["cost"]  # risk: the flaky search is dearer than a database query
    assert time[WEB]["expected_ms"] < 600 < 1900 < time[DB]["expected_ms"] < 2100  # time: the other way round
    assert time[WEB]["cost"] == pytest.approx(time[WEB]["expected_ms"] / 1000, abs=1e-3)
    assert main(["costs", *instance, "--traces", str(store), "--objective", "time"]) == 0
    assert "expected ms" in capsys.readouterr().out


def test_plan_objective_time_takes_the_quick_flaky_route(store, instance, capsys):
    task = bundled_task("tools", 1, 0)
    plans = {}
    for objective in ("risk", "time"):
        assert main(["plan", *instance, "--traces", str(store), "--objective", objective, "--json"]) == 0
        plans[objective] = json.loads(capsys.readouterr().out)["plan"]
        assert validate_plan(task, [parse_ground_action(s) for s in plans[objective]]).ok
    assert DB in plans["risk"] and not searches(plans["risk"])
    # a web search (web-pro, never tried, is priced like web-basic's timings with a milder prior p_fail)
    assert searches(plans["time"]) and DB not in plans["time"]


def searches(plan: list[str]) -> list[str]:
    return [step for step in plan if step.startswith("(web-search")]


def test_plan_prints_the_expected_time_and_serve_takes_the_objective_as_its_default(store, instance, capsys):
    from portfolio.cli import build_parser
    from portfolio.commands.serve_cmd import service_config

    assert main(["plan", *instance, "--traces", str(store), "--objective", "time"]) == 0
    assert "ms expected (learned, objective time)" in capsys.readouterr().out
    args = build_parser().parse_args(
        ["serve", "--objective", "time", "--side-effect-weight", "3", "--replan-ms", "500"]
    )
    served = service_config(args)
    assert (served.objective, served.side_effect_weight, served.replan_ms, served.max_retries) == (
        "time",
        3.0,
        500.0,
        2,
    )


@pytest.mark.parametrize("command", ["costs", "plan"])
def test_a_misspelled_objective_is_exit_2(store, instance, capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        main([command, *instance, "--traces", str(store), "--objective", "speed"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'speed'" in capsys.readouterr().err


def test_http_plan_and_costs_take_the_objective(store):
    import httpx
    from test_service_helpers import config, serve_in_thread

    task = bundled_task("tools", 1, 0)
    body = {"domain": task.domain_pddl, "problem": task.problem_pddl, "budget": 10}
    service = config(traces=str(store), delegates=["fast-downward", "pyperplan"], max_budget_s=10.0)
    with serve_in_thread(service) as (url, _):
        time = httpx.post(f"{url}/v1/plan", json=body | {"objective": "time"}, timeout=60).json()
        risk = httpx.post(f"{url}/v1/plan", json=body, timeout=60).json()
        bad = httpx.post(f"{url}/v1/plan", json=body | {"objective": "speed"}, timeout=60)
        task_only = {"domain": task.domain_pddl, "problem": task.problem_pddl}
        costs = httpx.post(f"{url}/v1/costs", json=task_only | {"objective": "time"}, timeout=60).json()["costs"]
        plain = httpx.post(f"{url}/v1/costs", json=task_only, timeout=60).json()["costs"]
    assert searches(time["plan"]) and not searches(risk["plan"])
    assert validate_plan(task, [parse_ground_action(s) for s in time["plan"]]).ok
    assert bad.status_code in (400, 422) and "objective" in bad.text
    assert all("expected_ms" in row for row in costs) and not any("expected_ms" in row for row in plain)


def test_agent_objective_reaches_its_planner_and_a_planner_brought_along_keeps_its_own(store):
    from portfolio.agent import Agent
    from portfolio.planner import Planner

    with Agent(traces=store, objective="time", replan_ms=1000.0, warm=False, max_retries=1) as agent:
        assert agent.planner.objective == "time"
        assert agent.planner.time == TimeParams(max_retries=1, replan_ms=1000.0)
    with pytest.raises(ObjectiveError, match="unknown objective 'speed'"):
        Agent(objective="speed", warm=False)
    with Planner(["pyperplan"], warm=False) as planner, pytest.raises(ValueError, match="the planner's own"):
        Agent(planner=planner, objective="time")
