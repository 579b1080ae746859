"""Learned costs steer real plans: an action that keeps failing is routed around, with and without the task's
own action costs, and a later run of successes brings it back."""

from __future__ import annotations

import json

import pytest
from support import portfolio, record

from domains.bundled import bundled_task, write_instance
from domains.validate import validate_plan
from learning.retrain import retrain
from portfolio.planner import Planner
from traces.records import StepRecord
from traces.store import TraceStore


def flaky(failures_in_ten: int, rounds: int) -> list[str]:
    return (["failure"] * failures_in_ten + ["success"] * (10 - failures_in_ten)) * rounds


def plan_with(store_path, task):
    with Planner(traces=store_path) as planner:
        result = planner.plan(task)
    assert result.solved, result.attempts
    assert validate_plan(task, result.actions()).ok
    return result


@pytest.mark.parametrize(
    "domain, size, unreliable, alternative_action",
    [
        # Action costs of its own: the cheap web engine becomes unreliable, the dearer one takes over.
        ("tools", 1, "(web-search job1 competitors web-basic)", "web-search"),
        # Unit costs: picking up with the left gripper fails, the right gripper takes over.
        ("gripper", 1, None, "pick"),
    ],
)
def test_unreliable_grounded_action_is_avoided_and_recovers(tmp_path, domain, size, unreliable, alternative_action):
    task = bundled_task(domain, size, seed=0)
    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        record(store, "noop-warmup", (), ["success"] * 5, "seed")
    baseline = plan_with(store_path, task)
    if unreliable is None:
        unreliable = next(step for step in baseline.plan if step.startswith(f"({alternative_action} "))
    assert unreliable in baseline.plan
    name, *args = unreliable.strip("()").split()

    with TraceStore(store_path) as store:
        record(store, name, tuple(args), flaky(8, 6), "bad-days")
        retrain(store)
    around = plan_with(store_path, task)
    assert unreliable not in around.plan
    assert any(step.startswith(f"({alternative_action} ") or alternative_action not in step for step in around.plan)
    assert around.success_probability is not None and around.success_probability > 0.5

    with TraceStore(store_path) as store:
        record(store, name, tuple(args), ["success"] * 400, "repaired")
        retrain(store)
    with Planner(traces=store_path) as planner:
        assert planner.learned_costs(task)[unreliable].p_fail < 0.2
    if domain == "tools":  # the repaired engine is the cheapest again (gripper's hands cost the same: a tie)
        assert unreliable in plan_with(store_path, task).plan


def test_plan_json_reports_success_probability_and_costs_command_lists_p_fail(tmp_path):
    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        record(store, "web-search", ("job1", "competitors", "web-basic"), flaky(8, 6), "r1")
        retrain(store)
    domain, problem = write_instance("tools", 1, 0, tmp_path)
    run = portfolio("plan", domain, problem, "--traces", store_path, "--json", timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert 0 < result["success_probability"] <= 1
    assert "(web-search job1 competitors web-basic)" not in result["plan"]

    run = portfolio("costs", domain, problem, "--traces", store_path, "--json", timeout=60)
    assert run.returncode == 0, run.stderr
    rows = {row["action"]: row for row in json.loads(run.stdout)}
    risky = rows["(web-search job1 competitors web-basic)"]
    safe = rows["(web-search job1 competitors web-pro)"]
    assert risky["p_fail"] > 0.5 > safe["p_fail"]
    assert risky["cost"] > safe["cost"]


def test_costs_without_a_model_is_a_clear_error(tmp_path):
    domain, problem = write_instance("tools", 1, 0, tmp_path)
    run = portfolio("costs", domain, problem, "--traces", tmp_path / "empty.db", timeout=60)
    assert run.returncode == 2
    assert "retrain" in run.stderr and "Traceback" not in run.stderr


def test_plans_are_recorded_in_the_trace_store(tmp_path):
    store_path = tmp_path / "traces.db"
    task = bundled_task("blocksworld", 3, seed=0)
    with Planner(traces=store_path) as planner:
        result = planner.plan(task)
    with TraceStore(store_path) as store:
        rows = list(store.db["plans"].rows)
    assert len(rows) == 1
    assert json.loads(rows[0]["plan"]) == result.plan


@pytest.mark.serial
def test_learned_costs_stay_inside_the_budget(tmp_path):
    """Grounding for learned costs happens inside the delegate's budget: a task whose translation alone takes
    seconds still times out on time with a model loaded."""
    import time

    from support import hardest_parking, load_ipc

    from portfolio.delegates.registry import CLASSICAL_ONLY

    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        record(store, "drive", ("t1", "a", "b"), flaky(5, 3), "r1")
        retrain(store)
    task = load_ipc("parking-sat11-strips", hardest_parking())
    with Planner(CLASSICAL_ONLY, traces=store_path) as planner:
        assert planner.model is not None
        started = time.monotonic()
        result = planner.plan(task)
        assert time.monotonic() - started <= 1.3
    assert result.status.value == "timeout"


def test_memoised_posteriors_equal_a_fresh_prediction_across_tasks_and_situations(store_target: str):
    """The model keeps each grounding's posterior between calls (`FailureModel.predict_posterior`); a task over
    other objects, another situation or a subset of the groundings must get exactly what a fresh model (nothing
    memoised) predicts."""
    import copy
    import time

    import numpy as np

    from domains.ground_text import parse_ground_action
    from learning.costs import action_posteriors
    from learning.retrain import load_latest
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.engine.results import PlanRequest

    with TraceStore(store_target) as store:
        record(store, "pick", ("ball1", "room1", "left"), flaky(8, 4), "bad")
        store.record_steps(
            [
                StepRecord(
                    run_id="rain",
                    step=i,
                    action="move",
                    args=("room1", "room2"),
                    features={"weather": "rain"},
                    outcome=o,
                )
                for i, o in enumerate(flaky(5, 4))
            ]
        )
        retrain(store)
        model = load_latest(store)
    pristine = copy.deepcopy(model)  # before any prediction: nothing memoised
    fresh_model = lambda: copy.deepcopy(pristine)  # noqa: E731 - a fresh copy per comparison
    tasks = [bundled_task("gripper", 1, seed=0), bundled_task("gripper", 2, seed=0), bundled_task("gripper", 1, seed=1)]
    for task in tasks:
        with FastDownward() as fd:
            grounded = [
                parse_ground_action(a) for a in fd.grounded_actions(PlanRequest(task=task), time.monotonic() + 30)
            ]
        for features in (None, {"weather": "rain"}, {"weather": "sun"}):
            for part in (grounded[::2], grounded):
                fresh = action_posteriors(fresh_model(), task, part, features)
                kept = action_posteriors(model, task, part, features)
                assert kept.keys == fresh.keys
                np.testing.assert_array_equal(kept.mean, fresh.mean)
                np.testing.assert_array_equal(kept.concentration, fresh.concentration)
    assert len(model.__dict__["_posterior_memo"]) >= 2  # one entry per object set and situation
