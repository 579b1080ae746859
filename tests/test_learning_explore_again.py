"""A second look beside a step that fails more often than not: under the default policy (`cautious`) an alternative
written off after an unlucky start is tried again beside it, and a plan of steps believed reliable is returned as
planned. Real SQLite, real Fast Downward (exact A*, so the plan is the optimum under the costs it was
given), every plan checked by the validator."""

from __future__ import annotations

from pathlib import Path

import pytest

from domains.bundled import write_instance
from domains.load import load_task
from domains.model import Task
from domains.validate import validate_plan
from learning.explore import EXPLORE_ABOVE, explore_again
from learning.retrain import retrain
from portfolio.delegates.registry import build_stages
from portfolio.planner import Planner
from traces.records import StepRecord
from traces.store import TraceStore

LEFT, RIGHT = "(pick ball1 room1 left)", "(pick ball1 room1 right)"


def step(run_id: str, index: int, action: str, args: tuple[str, ...], outcome: str) -> StepRecord:
    return StepRecord(run_id=run_id, step=index, action=action, args=args, outcome=outcome)


def gripper_with_records(tmp_path: Path, left: tuple[int, int], right: tuple[int, int]) -> tuple[Task, Path]:
    """One ball to carry to the other room, and a trace store with (failures, runs) of picking it up with each
    gripper (a run that picks it up carries it over and drops it), retrained."""
    domain, problem = write_instance("gripper", 1, 0, tmp_path)
    steps: list[StepRecord] = []
    for gripper, (failures, runs) in (("right", right), ("left", left)):
        for i in range(runs):
            run_id = f"{gripper}-{i}"
            failed = i * failures // runs != (i + 1) * failures // runs  # the failures spread over the runs
            steps.append(step(run_id, 0, "pick", ("ball1", "room1", gripper), "failure" if failed else "success"))
            if not failed:
                steps.append(step(run_id, 1, "move", ("room1", "room2"), "success"))
                steps.append(step(run_id, 2, "drop", ("ball1", "room2", gripper), "success"))
    store = tmp_path / "traces.db"
    with TraceStore(store) as traces:
        traces.record_steps(steps)
        retrain(traces)
    return load_task(domain, problem), store


def test_an_alternative_written_off_beside_a_plan_likely_to_fail_is_tried_again(tmp_path):
    """The left gripper failed 26 of 40 picks, the right one 2 of its 3. The right one's mean is the lower, but
    resting on 3 steps it is charged more for its uncertainty (its drop too), so the cautious plan picks with the
    left one (p_fail 0.63). Planning once more under a Thompson draw tries the right one within a few calls;
    before, it was never planned (20 calls)."""
    task, store = gripper_with_records(tmp_path, left=(26, 40), right=(2, 3))
    with Planner(build_stages(("fast-downward",), fd_alias="seq-opt-lmcut"), traces=store, seed=1) as planner:
        assert planner.explore == "cautious"
        costs = planner.learned_costs(task)
        assert costs[RIGHT].p_fail < costs[LEFT].p_fail
        route = {
            g: [f"(pick ball1 room1 {g})", "(move room1 room2)", f"(drop ball1 room2 {g})"] for g in ("left", "right")
        }
        assert sum(costs[s].cost for s in route["right"]) > sum(costs[s].cost for s in route["left"])
        tried = []
        for _ in range(10):
            result = planner.plan(task)
            assert result.solved and validate_plan(task, result.actions()).ok
            # named for the draw it was planned under: no later call's costs are the same, so none reuses it
            assert result.cost_model is not None and ":thompson:" in result.cost_model
            assert len(result.attempts) >= 2  # both plannings' attempts are kept
            tried.append(RIGHT in result.plan)
    assert any(tried), "the right gripper was not planned in 10 calls"


def test_a_plan_of_steps_believed_reliable_is_returned_as_planned(tmp_path):
    """The left gripper picked 5 of 5, the right one failed 2 of 3: no step of the cautious plan (the left one) is
    believed to fail more often than not, so it is returned under the cautious costs, one planning per call."""
    task, store = gripper_with_records(tmp_path, left=(0, 5), right=(2, 3))
    with Planner(build_stages(("fast-downward",), fd_alias="seq-opt-lmcut"), traces=store, seed=1) as planner:
        costs = planner.learned_costs(task)
        for _ in range(5):
            result = planner.plan(task)
            assert result.solved and validate_plan(task, result.actions()).ok
            assert max(costs[step].p_fail for step in result.plan) < EXPLORE_ABOVE
            assert LEFT in result.plan and len(result.attempts) == 1
            assert result.cost_model is not None and ":cautious:" in result.cost_model


@pytest.mark.parametrize(
    "policy, p_fail, again",
    [
        ("cautious", [0.02, EXPLORE_ABOVE, 0.1], "thompson"),
        ("cautious", [0.02, EXPLORE_ABOVE - 0.01], None),
        ("cautious", [0.2] * 10, None),  # a plan as likely to fail, from many steps alike: nothing better to find
        ("cautious", [], None),  # no steps, or no learned costs
        ("thompson", [0.9], None),  # it explores already
        ("optimistic", [0.9], None),
    ],
)
def test_only_a_cautious_plan_with_a_step_more_likely_to_fail_than_not_is_planned_again(policy, p_fail, again):
    assert explore_again(policy, p_fail) == again
