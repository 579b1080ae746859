"""Changes shared by siblings (`learning.siblings`): a road that broke for one van is believed broken for the
other vans too until they are driven on it, and a van driven on it since without failing clears itself. Through
the statistics, `FailureModel` fitted on recorded steps, and a plan (real SQLite and Fast Downward, validated)."""

from __future__ import annotations

import numpy as np

from domains.bundled import write_instance
from domains.load import load_task
from domains.model import GroundAction
from domains.validate import validate_plan
from learning.model import FailureModel
from learning.retrain import retrain
from learning.siblings import families, merged_breaks, mixed, sibling_changes
from portfolio.delegates.registry import build_stages
from portfolio.planner import Planner
from traces.records import StepRecord
from traces.store import TraceStore


def drives(outcomes: list[tuple[str, str, str, int]]) -> list[StepRecord]:
    """One run per drive: (van, from, to, failed)."""
    return [
        StepRecord(run_id=f"r{i}", step=0, action="drive", args=(van, a, b), outcome="failure" if failed else "success")
        for i, (van, a, b, failed) in enumerate(outcomes)
    ]  # fmt: skip


def history(break_failures: int = 3) -> list[tuple[str, str, str, int]]:
    """Two vans drive the road a-b and the detour a-x, x-b without failing; then the road breaks for v1."""
    rows = []
    for _ in range(20):
        rows += [("v1", "a", "b", 0), ("v2", "a", "b", 0), ("v1", "a", "x", 0), ("v1", "x", "b", 0)]
    return rows + [("v1", "a", "b", 1)] * break_failures


def p_fail(model: FailureModel, *args: str) -> float:
    return float(model.predict_proba([GroundAction("drive", args)])[0])


def test_a_van_never_driven_on_a_road_since_it_broke_for_another_is_believed_broken_in_part():
    before = FailureModel().fit(drives(history(break_failures=0)))
    model = FailureModel().fit(drives(history()))
    assert p_fail(model, "v1", "a", "b") > 0.5  # its own record: cut at the break
    assert p_fail(before, "v2", "a", "b") < 0.05
    assert p_fail(model, "v2", "a", "b") > 0.15  # a quarter of the way to the road's new rate
    # a drive that shares no more than one object with the broken one is not a sibling: the token prior alone
    assert "a v2 x" not in model.actions_["drive"].shared and p_fail(model, "v2", "a", "x") < 0.1


def test_a_second_van_failing_on_the_road_since_makes_the_shared_break_near_certain():
    model = FailureModel().fit(drives(history() + [("v2", "a", "b", 1)]))
    assert p_fail(model, "v2", "a", "b") > 0.6
    # and a third van, never driven on the road at all, is believed broken there too
    assert p_fail(model, "v3", "a", "b") < p_fail(model, "v2", "a", "b")


def test_a_van_driven_on_the_road_since_without_failing_clears_itself():
    shared = FailureModel().fit(drives(history()))
    cleared = FailureModel().fit(drives(history() + [("v2", "a", "b", 0)] * 2))
    assert p_fail(cleared, "v2", "a", "b") < p_fail(shared, "v2", "a", "b") / 2


def test_the_odds_follow_the_siblings_evidence_since_the_change():
    # groups: 0 = (a b v1), the changed one; 1 = (a b v2), 2 = (a v1 x), 3 = (b v2 x): two objects differ
    objects = [("a", "b", "v1"), ("a", "b", "v2"), ("a", "v1", "x"), ("b", "v2", "x")]
    group = np.array([0] * 20 + [1] * 20 + [2] * 5 + [3] * 5 + [0, 0, 0])
    step = np.arange(len(group))
    failed = np.array([0] * 50 + [1, 1, 1])
    cut = np.array([50, -1, -1, -1])  # group 0 changed at step 50
    out = sibling_changes(cut, group, step, failed, np.zeros(4, dtype=np.int64), objects)
    assert out[0, 0] == 0.0  # the changed group is judged on its own record
    assert np.isclose(out[1, 0], 0.25) and np.isclose(out[2, 0], 0.25)  # no steps since: the prior, 1 / (3 + 1)
    assert out[3, 0] == 0.0
    assert tuple(out[1, 1:]) == (3.0, 3.0)  # the common rate's steps and failures since the change
    # group 1 fails once since the change: the change shared is near certain; once it succeeds, less than before
    for outcome, low, high in ((1, 0.8, 1.0), (0, 0.0, 0.25)):
        more = sibling_changes(
            cut, np.append(group, 1), np.append(step, len(group)), np.append(failed, outcome), np.zeros(4, np.int64),
            objects,
        )  # fmt: skip
        assert low < more[1, 0] < high


def three_vans(after: list[tuple[str, int]]) -> list[tuple[str, str, str, int]]:
    """Three vans drive the road a-b 15 times each without failing, taking turns, then the drives `after`."""
    return [(van, "a", "b", 0) for _ in range(15) for van in ("v1", "v2", "v3")] + [
        (van, "a", "b", failed) for van, failed in after
    ]


def test_a_break_the_vans_records_show_only_together_is_found_on_their_merged_record():
    """One failure each for three vans taking turns after 15 good drives each: no van's record alone reaches the
    change odds (each is priced 0.06 without the merged record), the road's merged record does. The van with the
    most failures since carries the cut, the others share it."""
    model = FailureModel().fit(drives(three_vans([("v1", 1), ("v2", 1), ("v3", 1)])))
    assert model.predict_evidence([GroundAction("drive", ("v1", "a", "b"))])[0].changes == 1
    assert p_fail(model, "v1", "a", "b") > 0.5  # its record cut where the road broke
    assert p_fail(model, "v2", "a", "b") > 0.5 and p_fail(model, "v3", "a", "b") > 0.5  # shared, a failure each
    # one van's single failure is no break of the road
    once = FailureModel().fit(drives(three_vans([("v1", 1)])))
    assert max(p_fail(once, van, "a", "b") for van in ("v1", "v2", "v3")) < 0.1


def test_a_merged_break_is_put_down_to_a_member_whose_own_record_changed_there():
    # groups: 0, 1, 2 = (a b v1), (a b v2), (a b v3), alike but for the van
    kin = families(np.zeros(3, dtype=np.int64), [("a", "b", "v1"), ("a", "b", "v2"), ("a", "b", "v3")])
    assert kin == [[0, 1, 2]]  # the road a b; each van and one place is a set of one group only
    group = np.array([0, 1, 2] * 15 + [0, 1, 2, 0])
    step = np.arange(len(group))
    failed = np.array([0] * 45 + [1, 1, 1, 1])
    none = np.full(3, -1)
    assert merged_breaks(none, group, step, failed, kin, 20.0).tolist() == [45, -1, -1]
    # a van bad from its first step has not changed: its failures make no break of the others' road
    bad_from_the_start = np.array([1, 0, 0] * 15 + [1, 0, 0, 1])
    assert merged_breaks(none, group, step, bad_from_the_start, kin, 20.0).tolist() == [-1, -1, -1]
    # failures that fell when the plans moved from a bad van to the others are no change either
    moved = np.array([0] * 10 + [1] * 10 + [2] * 29)
    fell = np.array([1, 0] * 5 + [1, 1, 0, 1, 1, 1, 0, 1, 1, 1] + [0] * 29)
    assert merged_breaks(none, moved, np.arange(49), fell, kin, 20.0).tolist() == [-1, -1, -1]
    # a cut of the member's own at or after the merged break stands
    assert merged_breaks(np.array([47, -1, -1]), group, step, failed, kin, 20.0).tolist() == [47, -1, -1]


def test_a_grounding_with_an_object_twice_is_counted_once_in_its_families():
    """`move a a v1` leaves the set (a, v1) twice: it is one member of that family, not two, so its steps since
    its change count once in the common rate of a sibling, and it is no sibling of itself."""
    objects = [("a", "a", "v1"), ("a", "v1", "x")]
    assert families(np.zeros(2, dtype=np.int64), objects) == [[0, 1]]
    group = np.array([0] * 20 + [1] * 5 + [0, 0, 0])
    failed = np.array([0] * 25 + [1, 1, 1])
    out = sibling_changes(np.array([25, -1]), group, np.arange(28), failed, np.zeros(2, dtype=np.int64), objects)
    assert tuple(out[1, 1:]) == (3.0, 3.0)  # the changed group's 3 failures in 3 steps since, once


def test_a_mixture_keeps_the_mean_and_widens_the_posterior():
    mean, concentration = mixed(np.array([0.03, 0.03]), np.array([40.0, 40.0]), np.array([0.0, 0.25]),
                                np.array([3.0, 3.0]), np.array([3.0, 3.0]))  # fmt: skip
    assert mean[0] == 0.03 and concentration[0] == 40.0  # no shared change: unchanged
    assert np.isclose(mean[1], 0.75 * 0.03 + 0.25 * 3.03 / 4.0)  # 3 of 3, one pseudo-step at its own 0.03
    assert concentration[1] < 40.0


BALL2_ONLY = """(define (problem gripper-ball2)
  (:domain gripper)
  (:objects room1 room2 - room ball1 ball2 - ball left right - gripper)
  (:init (at-robby room1) (free left) (free right) (at ball1 room1) (at ball2 room1))
  (:goal (at ball2 room2)))
"""


def test_a_plan_leaves_a_gripper_that_broke_on_another_ball(tmp_path):
    """Both grippers carried both balls for 20 runs; then the left one failed to pick ball1 three times. Carrying
    ball2, which it never failed on, the plan takes the right gripper: the left one's change is believed shared
    by its picks of the other ball in the same room (a quarter, to begin with)."""
    domain, _ = write_instance("gripper", 2, 0, tmp_path)
    problem = tmp_path / "ball2.pddl"
    problem.write_text(BALL2_ONLY)
    task = load_task(domain, problem)
    steps: list[StepRecord] = []
    for i in range(20):
        grippers = ("left", "right") if i % 2 else ("right", "left")
        for ball, gripper in zip(("ball1", "ball2"), grippers):
            for index, (name, args) in enumerate(
                (("pick", (ball, "room1", gripper)), ("move", ("room1", "room2")), ("drop", (ball, "room2", gripper)))
            ):
                steps.append(StepRecord(run_id=f"r{i}-{ball}", step=index, action=name, args=args, outcome="success"))
    steps += [
        StepRecord(run_id=f"broken{i}", step=0, action="pick", args=("ball1", "room1", "left"), outcome="failure")
        for i in range(3)
    ]
    store = tmp_path / "traces.db"
    with TraceStore(store) as traces:
        traces.record_steps(steps)
        retrain(traces)
    with Planner(build_stages(("fast-downward",), fd_alias="seq-opt-lmcut"), traces=store, seed=1) as planner:
        costs = planner.learned_costs(task)
        left, right = costs["(pick ball2 room1 left)"], costs["(pick ball2 room1 right)"]
        assert left.evidence is not None and left.evidence.failures == 0 and left.evidence.shared_change > 0.2
        assert left.p_fail > 0.15 and right.p_fail < 0.05
        result = planner.plan(task)
        assert result.solved and validate_plan(task, result.actions()).ok
        assert "(pick ball2 room1 right)" in result.plan
