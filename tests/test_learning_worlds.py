"""A small world of each generated type (portfolio/benchsuite/worlds/family.py) in which learned costs beat
cost-blind planning: the same harness as `portfolio bench learning`, one world per type, 120 episodes, the
default exploration policy. Noise-free (expected success of the chosen plans), so the verdict is not luck."""

from __future__ import annotations

import heapq
import itertools
import statistics

import pytest

from domains.validate import validate_plan
from learning.explore import DEFAULT_EXPLORE
from portfolio.benchsuite.worlds.changing import CHANGING_KINDS
from portfolio.benchsuite.worlds.exact import CostRecorder, ExactSearch, plan_cost_under
from portfolio.benchsuite.worlds.family import KINDS, make_world
from portfolio.benchsuite.worlds.runner import LAM, execute, fails, run_world, true_costs
from portfolio.delegates.fast_downward.inprocess import INPROCESS_NAME
from portfolio.delegates.registry import DEFAULT_DELEGATES

EPISODES, LAST = 120, 40
# type: before episode 100 most episodes offer only the bad-type vehicles (every arm fails alike there), so it is
# measured on episodes 110-149, when every vehicle is there.
SETTINGS = {"type": (150, 40, 0.6)}
# drift: roads turn bad at episode 60 and are repaired at 130, measured while they are bad (episodes 90-129), where
# the learned arm must notice the change from a few drives of each bad grounding, after their earlier successes.
# One world is too noisy a sample for that: cost-blind's plans are whichever parallel search answers first (equally
# short routes, some over a bad road), and on drift-0 the learned arm's failures were 0.62x-1.09x cost-blind's over
# six runs (0.454 against 0.454 once in CI). Pooled over seeds 0-4 the ratio was 0.66x-0.82x (six runs, two at a
# time), the oracle's failures 0.06 against the learned arm's 0.21-0.25: it learns the change, slowly.
DRIFT_EPISODES, DRIFT_SEEDS, DRIFT_FACTOR = 130, range(5), 0.9


# closed_loop: one world's closed loop is path-noisy (which search answers first decides which of equal plans the
# learner tries next), and the rest of the suite taking its core adds to it: groundings-0's learned failures were
# 0.087 against the 0.075 bound once in the parallel phase, under it in 5 of 5 runs alone. `make test` runs these
# apart, one per core (each world is one process): every test passed in 5 of 5 such runs
pytestmark = pytest.mark.closed_loop


def last_failure(run, arm: str, last: int = LAST) -> float:
    return 1.0 - statistics.mean(run.expected[arm][-last:])


@pytest.mark.slow
# tools: test_learning_harness; the changing kinds are measured by `portfolio bench learning` (leave and return),
# where the current model is the baseline the report compares against, not a bar this test holds
@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("tools", "drift", *CHANGING_KINDS)])
def test_learned_costs_beat_cost_blind_in_a_small_world(kind):
    episodes, last, factor = SETTINGS.get(kind, (EPISODES, LAST, 0.6))
    for seed in range(5):  # the first world where cost-blind planning fails at all often
        run = run_world(make_world(kind, seed), episodes, retrain_every=10, policies=(DEFAULT_EXPLORE,))
        if last_failure(run, "cost-blind", last) >= 0.10:
            break
    else:
        pytest.fail(f"no {kind} world among seeds 0-4 where cost-blind planning fails 10% of the time")
    learned = f"learned-{DEFAULT_EXPLORE}"
    why = {  # what a failure needs to be told apart: load (who answered) or learning (which episodes differ)
        "world": run.world,
        "last failure": {arm: round(last_failure(run, arm, last), 4) for arm in run.expected},
        "learned answered by": run.searches[learned],
        "last episodes planned unlike cost-blind": sum(
            a != b for a, b in zip(run.expected[learned][-last:], run.expected["cost-blind"][-last:], strict=True)
        ),
    }
    assert last_failure(run, learned, last) < factor * last_failure(run, "cost-blind", last), why
    assert last_failure(run, "oracle", last) <= last_failure(run, learned, last) + 0.05
    calibration = run.calibration[DEFAULT_EXPLORE]
    assert calibration["consistency_max_gap"] is None or calibration["consistency_max_gap"] <= 0.05 + 1e-9
    if kind == "type":  # the new van-a's starting p_fail, next to what its siblings' traces said at that moment
        new = run.new_object[DEFAULT_EXPLORE]
        assert new["episode"] == 100 and new["sibling_steps"] >= 60  # most episodes offered only van-a
        for probe in (new, *run.new_object_100.values()):  # the 100-step probe, when the siblings got there
            assert probe["true"] == 0.5 and probe["sibling_weight"] <= probe["sibling_steps"]
            assert abs(probe["sibling_rate"] - 0.5) < 0.2  # ~100 drives of vehicles failing half the time
            assert new["gap_siblings"] == pytest.approx(abs(new["p_new"] - new["sibling_rate"]))
            assert new["gap_true"] == pytest.approx(abs(new["p_new"] - 0.5)) and new["p_new"] > 0.2  # pessimistic


@pytest.mark.slow
def test_learned_costs_notice_roads_that_turn_bad():
    """Pooled over the drift worlds of seeds 0-4: while two roads are bad, fewer failures than cost-blind."""
    learned = f"learned-{DEFAULT_EXPLORE}"
    failures: dict[str, list[float]] = {"cost-blind": [], learned: [], "oracle": []}
    for seed in DRIFT_SEEDS:
        run = run_world(make_world("drift", seed), DRIFT_EPISODES, retrain_every=10, policies=(DEFAULT_EXPLORE,))
        for arm, values in failures.items():
            values.append(last_failure(run, arm))
        gap = run.calibration[DEFAULT_EXPLORE]["consistency_max_gap"]
        assert gap is None or gap <= 0.05 + 1e-9, (seed, gap)
    mean = {arm: statistics.mean(values) for arm, values in failures.items()}
    assert mean["cost-blind"] >= 0.10, failures  # the bad roads are on cost-blind's routes
    assert mean[learned] < DRIFT_FACTOR * mean["cost-blind"], failures
    assert mean["oracle"] <= mean[learned] + 0.05, failures


def test_worlds_are_reproducible_and_plans_valid():
    world = make_world("pairs", 7)
    assert make_world("pairs", 7) is world and world.episode(3) == make_world("pairs", 7).episode(3)
    spec = world.episode(3)
    from portfolio.benchsuite.worlds.route_search import RouteSearch
    from portfolio.planner import Planner

    with Planner([RouteSearch()], warm=False) as planner:
        result = planner.plan(world.task(spec))
    plan = result.actions()
    assert result.solved and validate_plan(world.task(spec), plan).ok
    first = execute(world, world.task(spec), plan, spec)
    assert first == execute(world, world.task(spec), plan, spec)  # common random numbers
    assert all(not failed for _, failed in first[:-1])  # stops at the first failure
    bad = sorted(world.bad["roads"], key=sorted)[0]
    a, b = sorted(bad)
    assert (
        world.p_fail(planner_step(f"(drive v0 {a} {b})"), spec)
        == world.p_fail(planner_step(f"(drive v1 {b} {a})"), spec)
        == 0.7
    )


def test_arms_share_each_steps_outcome_whatever_else_their_plans_hold():
    """Common random numbers: a grounding's k-th execution in an episode fails or not alike in any plan (another
    arm's plan with other steps before it), so the arms differ only by what they choose. Over 40 episodes, with
    the truck's bad roads first where it has one (70%: a draw seeded by the step's place in the plan would differ
    in about 4 episodes of 10)."""
    from domains.model import GroundAction

    world = make_world("vehicle-roads", 0)
    compared = 0
    for index in range(40):
        spec = world.episode(index)
        task, starts = world.task(spec), dict(spec.starts)
        mine = min(
            (GroundAction("drive", ("t0", *r)) for r in world.roads if r[0] == starts["t0"]),
            key=lambda step: (-world.p_fail(step, spec), step.args),
        )
        other = GroundAction("drive", ("t1", *sorted(r for r in world.roads if r[0] == starts["t1"])[0]))
        alone = execute(world, task, [mine], spec)
        assert execute(world, task, [mine], spec) == alone  # the same plan twice: the same outcomes
        after_another = execute(world, task, [other, mine], spec)
        if after_another[0][1]:  # the other step failed: the plan stops before `mine`
            continue
        assert after_another[1] == alone[0]
        compared += 1
    assert compared >= 30


def test_common_random_numbers_keep_the_true_probabilities():
    """The shared draws change no probability: over 4,000 episodes a truck's bad road fails at 0.7 and a fair
    drive at 0.02 (within 4 standard errors), and the two fail together as often as independence says."""
    from domains.model import GroundAction

    world = make_world("vehicle-roads", 0)
    a, b = sorted(next(iter(world.bad["truck_roads"]["t0"])))
    bad = GroundAction("drive", ("t0", a, b))
    fair = next(
        GroundAction("drive", ("t0", *r))
        for r in sorted(world.roads)
        if frozenset(r) not in world.bad["truck_roads"]["t0"]
    )
    n = 4000
    specs = [world.episode(i) for i in range(n)]
    assert world.p_fail(bad, specs[0]) == 0.7 and world.p_fail(fair, specs[0]) == 0.02
    bad_fails = [fails(world, s, bad, 0) for s in specs]
    fair_fails = [fails(world, s, fair, 0) for s in specs]
    again = [fails(world, s, bad, 1) for s in specs]  # a second execution in the same episode: a draw of its own
    for outcomes, p in ((bad_fails, 0.7), (fair_fails, 0.02), (again, 0.7)):
        assert abs(statistics.mean(outcomes) - p) <= 4 * (p * (1 - p) / n) ** 0.5
    both = statistics.mean(x and y for x, y in zip(bad_fails, fair_fails))
    assert abs(both - 0.7 * 0.02) <= 4 * (0.014 * 0.986 / n) ** 0.5
    assert statistics.mean(x == y for x, y in zip(bad_fails, again)) < 0.65  # not the first draw repeated


def planner_step(text: str):
    from domains.ground_text import parse_ground_action

    return parse_ground_action(text)


# -- the harness plans as users do; the yardsticks are exact ----------------------------------------------------

NEW_KINDS = ("detours", "vehicle-roads", "agent-tools")


def brute_force_optimum(task, costs) -> float:
    """Uniform-cost search over the task's states with the validator's successor function: an optimum that
    shares no code with the searches under test. `costs`: grounded action -> cost (others cost 1)."""
    from domains.validate import goal_reached, successor
    from portfolio.delegates.typed_search import ground

    static = {atom for atom in task.problem.init if atom.predicate == "road"}
    actions = [
        a for a in ground(task, 100_000).actions if a.name != "drive" or any(atom.args == a.args[1:] for atom in static)
    ]
    start = task.problem.init
    frontier, seen, tie = [(0.0, 0, start)], set(), itertools.count(1)
    while frontier:
        g, _, state = heapq.heappop(frontier)
        if state in seen:
            continue
        seen.add(state)
        if goal_reached(task, state):
            return g
        for action in actions:
            after = successor(task, state, action)
            if after is not None and after not in seen:
                heapq.heappush(frontier, (g + costs.get(str(action), 1.0), next(tie), after))
    raise AssertionError("unsolvable")


def _true_cost_table(world, task, spec) -> dict[str, float]:
    from portfolio.delegates.typed_search import ground

    names = [str(a) for a in ground(task, 100_000).actions]
    return true_costs(world, task, spec)(names)


@pytest.mark.parametrize("kind, seed", [("detours", 2), ("vehicle-roads", 4), ("agent-tools", 3), ("pairs", 1)])
def test_the_oracle_is_exact(kind, seed):
    """Its plan's true cost equals a brute-force optimum (Fast Downward A* with LM-cut, or Dijkstra for routes)."""
    world = make_world(kind, seed)
    with_trucks = world.domain == "delivery"
    exact = ExactSearch(world.domain)
    try:
        for index in range(3):
            spec = world.episode(index)
            task = world.task(spec)
            table = _true_cost_table(world, task, spec)
            result = exact.solve(task, true_costs(world, task, spec))
            assert validate_plan(task, result.actions()).ok
            if world.domain == "routes":
                assert result.delegate == "route-search"
            else:
                assert result.attempts[-1].details["search"] == "seq-opt-lmcut"
            if with_trucks or world.domain == "tools" or index == 0:
                assert plan_cost_under(task, result.plan, table) == pytest.approx(
                    brute_force_optimum(task, table), abs=1e-2
                )
    finally:
        exact.close()


def test_measured_arms_run_the_default_cascade_and_the_oracle_does_not():
    """Cost-blind and learned calls are answered by the default cascade's Fast Downward (the search it picks),
    never by the exact searches the oracle uses; every learned call records its plan quality."""
    for kind, seed, oracle in (("pairs", 1, {"route-search"}), ("detours", 2, {"fast-downward/seq-opt-lmcut"})):
        run = run_world(make_world(kind, seed), 12, retrain_every=4, policies=("cautious",))
        assert set(run.searches["oracle"]) == oracle
        for arm in ("cost-blind", "learned-cautious"):
            assert sum(run.searches[arm].values()) == 12
            # the default cascade's delegates only (pyperplan answers when Fast Downward misses its share on a
            # loaded machine), Fast Downward most of the time (its search processes, or on a small task its
            # in-process searches), and never the routes shortcut the oracle uses
            answered = {key.split("/")[0] for key in run.searches[arm]}
            assert answered <= {*DEFAULT_DELEGATES, INPROCESS_NAME}, run.searches[arm]
            fast_downward = ("fast-downward/", INPROCESS_NAME + "/")
            assert sum(n for key, n in run.searches[arm].items() if key.startswith(fast_downward)) >= 8
        assert len(run.latency_ms["cost-blind"]) == len(run.latency_ms["learned-cautious"]) == 12
        assert "oracle" not in run.latency_ms  # only the measured arms' latency is reported
        quality = run.quality["cautious"]
        assert len(quality) == 12 - 4  # no learned costs before the first retrain: nothing to compare
        for call in quality:
            assert call["optimum"] <= call["cost"] + 1e-3  # the optimum is a lower bound on every plan
            assert 0 < call["ms"] and call["budget_ms"] == 1000


def test_the_cost_recorder_keeps_the_costs_the_planner_planned_with():
    from domains.ground_text import parse_ground_action
    from learning.costs import action_costs
    from learning.retrain import retrain
    from portfolio.planner import Planner
    from traces.records import StepRecord

    world = make_world("detours", 2)
    spec = world.episode(0)
    task = world.task(spec)
    with Planner(traces=":memory:", cost_weight=LAM) as planner:
        recorder = CostRecorder(planner)
        blind = planner.plan(task)
        assert blind.solved and recorder.costs == {}  # no model yet: the task's own costs
        for run in range(3):  # each drive fails once in three: no step more likely to fail than not (one planning)
            run_id = planner.store.start_run(task.fingerprint, "g", run_id=f"r{run}")
            planner.store.record_steps(
                StepRecord(
                    run_id=run_id,
                    step=i,
                    action=s.name,
                    args=s.args,
                    features=spec.context,
                    outcome="failure" if s.name == "drive" and run == 0 else "success",
                )
                for i, s in enumerate(blind.actions())
            )
        retrain(planner.store, holdout_fraction=0.0)
        planner.reload_model()
        result = planner.plan(task, features=spec.context)
        assert result.solved and recorder.calls >= 1 and ":cautious:" in str(result.cost_model)
        actions = [parse_ground_action(name) for name in recorder.costs]
        expected = action_costs(planner.model, task, actions, spec.context, lam=LAM)
        assert recorder.costs == pytest.approx({name: c.cost for name, c in expected.items()})
        assert set(result.plan) <= set(recorder.costs)
        # the planner's own account of the plan's learned cost agrees with the recorded costs
        assert result.learned_cost == pytest.approx(plan_cost_under(task, result.plan, recorder.costs), abs=1e-4)


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_new_types_generate_valid_solvable_tasks_of_several_sizes(kind):
    from portfolio.planner import Planner

    sizes = set()
    with Planner() as planner:
        for seed in range(6):
            world = make_world(kind, seed)
            sizes.add((len(world.places), len(world.vehicles), world.bad.get("packages"), world.bad.get("size")))
            for index in (0, 7):
                spec = world.episode(index)
                task = world.task(spec)
                result = planner.plan(task)
                assert result.solved and validate_plan(task, result.actions()).ok
                assert all(0 <= world.p_fail(step, spec) < 1 for step in result.actions())
    assert len(sizes) >= 3  # the seed draws the size


def test_a_detours_shortcut_is_cheaper_under_unit_costs_and_worse_under_true_costs():
    for seed in range(3):
        world = make_world("detours", seed)
        shortcut = world.bad["shortcut"]
        exact = ExactSearch("delivery")
        try:
            spec = world.episode(1)
            task = world.task(spec)
            table = _true_cost_table(world, task, spec)
            unit = exact.solve(task, {})
            true = exact.solve(task, table)
        finally:
            exact.close()

        def crossings(result):
            return sum(s.name == "drive" and frozenset(s.args[1:]) == shortcut for s in result.actions())

        assert crossings(unit) >= 1 and crossings(true) == 0  # every package crosses between the districts
        assert len(unit.plan) < len(true.plan)  # cheaper under unit costs: 2-4 drives shorter a crossing
        assert plan_cost_under(task, unit.plan, table) > plan_cost_under(task, true.plan, table) + 1.0
        assert validate_plan(task, unit.actions()).ok and validate_plan(task, true.actions()).ok


@pytest.mark.slow
def test_plan_quality_on_bundled_tasks_compares_with_a_proved_optimum():
    from portfolio.benchsuite.worlds.bundled import BundledWorld, bundled_quality
    from portfolio.benchsuite.worlds.report import bundled_table

    rows = bundled_quality(episodes=6, retrain_every=3, tasks=(("gripper", 4), ("tools", 3)))
    for name in ("gripper-4", "tools-3"):
        q = rows[name]
        # learned costs from the first retrain on, one call an episode
        assert q["calls"] + q["unproved"] + q["unsolved"] == 3 and q["unsolved"] == 0
        assert q["ratio_median"] >= 1.0 - 1e-3 and q["ratio_max"] >= q["ratio_p95"] >= q["ratio_median"]
        assert q["over_budget"] <= q["calls"] and q["ms_max"] > 0
    assert "| gripper-4 | " in "\n".join(bundled_table(rows))
    from domains.bundled import bundled_task
    from portfolio.delegates.typed_search import ground

    world = BundledWorld("gripper", 4)
    actions = ground(bundled_task("gripper", 4, 0), 100_000).actions
    bad = [a for a in actions if world.p_fail(a) == 0.5]
    assert 0.03 < len(bad) / len(actions) < 0.3  # about one grounding in BAD_EVERY = 8 fails half the time
    assert all(world.p_fail(a) == 0.02 for a in actions if a not in bad)
