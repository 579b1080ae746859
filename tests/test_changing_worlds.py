"""The changing world types (`outage`, `degradation`, `flapping`) and `few-observations`: what they generate, when
their truth changes, that the oracle follows the current truth, and how leave/return and the calibration of
predicted plan success are scored (`adapt.py`, `report_changes.py`) on hand-made runs."""

from __future__ import annotations

import pytest

from domains.model import GroundAction
from domains.validate import validate_plan
from portfolio.benchsuite.worlds.adapt import plan_pairs, scores, shifts
from portfolio.benchsuite.worlds.changing import BAD_P, CHANGING_KINDS, GOOD_P, OTHER_P
from portfolio.benchsuite.worlds.exact import ExactSearch
from portfolio.benchsuite.worlds.family import make_world
from portfolio.benchsuite.worlds.report import report, summarise
from portfolio.benchsuite.worlds.runner import WorldRun, true_costs

SEEDS = range(6)


def _watched_drives(world):
    a, b = world.bad["watched"]
    return [GroundAction("drive", (v, a, b)) for v in world.vehicles]


@pytest.mark.parametrize("kind", CHANGING_KINDS)
def test_the_truth_changes_at_the_drawn_episodes(kind):
    starts = set()
    for seed in SEEDS:
        world = make_world(kind, seed)
        events = world.events(200)
        assert events and events[0][1] == "break"
        starts.add(events[0][0])
        watched = _watched_drives(world)
        other = GroundAction("drive", ("v0", *reversed(world.bad["watched"])))  # the other direction never changes
        for index in range(200):
            spec = world.episode(index)
            ps = {world.p_fail(step, spec) for step in watched}
            assert len(ps) == 1  # bad for every vehicle alike
            assert world.p_fail(other, spec) == OTHER_P and not world.watched(other)
            assert all(world.watched(step) for step in watched)
        p = [world.p_fail(watched[0], world.episode(i)) for i in range(200)]
        if kind == "degradation":
            start, end, low, high = world.bad["ramp"]
            assert 30 <= start < 70 and 40 <= end - start <= 90 and 0.6 <= high <= 0.8
            assert p[start] == low and p[-1] == high and all(x <= y for x, y in zip(p, p[1:]))
            assert start < events[0][0] < end  # the detour becomes cheaper on the way up
        else:
            for (at, what), nxt in zip(events, [*events[1:], (200, "")]):
                assert set(p[at : nxt[0]]) == {BAD_P if what == "break" else GOOD_P}
                assert p[at - 1] != p[at]
            assert set(p[: events[0][0]]) == {GOOD_P}
            if kind == "outage":
                (brk, _), (rec, what) = events
                assert 40 <= brk < 80 and 30 <= rec - brk <= 60 and what == "recovery" and 200 - rec >= 60
            else:
                assert 30 <= events[0][0] < 50 and len(events) >= 4
                assert all(25 <= b[0] - a[0] <= 40 for a, b in zip(events, events[1:]))
    assert len(starts) >= 4  # the seed draws when


@pytest.mark.parametrize("kind", CHANGING_KINDS)
def test_the_oracle_follows_the_current_truth_and_there_is_always_a_way_round(kind):
    exact = ExactSearch("routes")
    try:
        for seed in SEEDS[:3]:
            world = make_world(kind, seed)
            brk = world.events(200)[0][0]
            for index, bad in ((brk - 1, False), (brk + 20 if kind != "degradation" else 199, True)):
                spec = world.episode(index)
                task = world.task(spec)
                result = exact.solve(task, true_costs(world, task, spec))
                plan = result.actions()
                assert validate_plan(task, plan).ok
                assert any(map(world.watched, plan)) is not bad, (world.name, index, result.plan)
    finally:
        exact.close()


def test_few_observations_worlds_have_few_groundings_and_an_alternative_for_every_bad_tool():
    sizes = set()
    exact = ExactSearch("agent")
    try:
        for seed in SEEDS:
            world = make_world("few-observations", seed)
            assert world.domain == "agent" and not world.events(200)
            per_action: dict[str, list[str]] = {}
            for tool, kind in world.vehicles.items():
                per_action.setdefault(kind.removesuffix("-tool"), []).append(tool)
            assert all(1 <= len(tools) <= 3 for tools in per_action.values())
            assert world.bad["tools"] and all(0.3 <= p <= 0.6 for p in world.bad["tools"].values())
            for bad in world.bad["tools"]:
                assert len(per_action[bad.rsplit("-", 1)[0]]) >= 2 and world.bad["price"][bad] == 1
            sizes.add(len(per_action))
            spec = next(
                s for s in map(world.episode, range(50)) if any(a[0] + "-a" in world.bad["tools"] for a in s.cargo)
            )
            task = world.task(spec)
            oracle = exact.solve(task, true_costs(world, task, spec))
            blind = exact.solve(task, {})
            assert validate_plan(task, oracle.actions()).ok and validate_plan(task, blind.actions()).ok
            assert not any(s.args[0] in world.bad["tools"] for s in oracle.actions())  # the dearer tool
            assert any(s.args[0] in world.bad["tools"] for s in blind.actions())  # unit costs: the cheap one
    finally:
        exact.close()
    assert len(sizes) >= 2


def test_leave_and_return_are_counted_from_each_event():
    events = [(2, "break"), (6, "recovery"), (9, "break")]
    # per episode: (watched steps in the plan, watched steps that failed)
    watched = [(1, 0), (1, 0), (1, 1), (1, 0), (1, 1), (0, 0), (0, 0), (0, 0), (1, 0), (1, 1), (1, 1)]
    rows = shifts(events, watched)
    assert rows[0] == {"episode": 2, "event": "break", "episodes": 3, "failures": 2}  # left at episode 5
    assert rows[1] == {"episode": 6, "event": "recovery", "episodes": 2, "away": True}  # back at episode 8
    assert rows[2] == {"episode": 9, "event": "break", "episodes": None, "failures": 2}  # never left before the end
    assert shifts([(1, "recovery")], [(0, 0), (0, 0), (0, 0)])[0]["episodes"] is None  # never came back
    stayed = shifts([(1, "recovery")], [(1, 1), (1, 0), (1, 0)])[0]
    assert stayed["episodes"] == 0 and not stayed["away"]  # it never left: nothing to return from


def test_ece_and_brier_of_predicted_plan_success():
    pairs = [(0.95, True)] * 8 + [(0.95, False)] * 2 + [(0.25, False)] * 3 + [(0.25, True)]
    s = scores(pairs)
    # bins: [0.9, 1.0): predicted 0.95, observed 0.8 (10 pairs); [0.2, 0.3): predicted 0.25, observed 0.25 (4)
    assert s["ece"] == pytest.approx((10 * 0.15 + 4 * 0.0) / 14, abs=1e-4)
    brier = (8 * 0.05**2 + 2 * 0.95**2 + 3 * 0.25**2 + 0.75**2) / 14
    assert s["brier"] == pytest.approx(brier, abs=1e-4)
    assert s["bins"] == [pytest.approx((0.25, 0.25, 4)), pytest.approx((0.95, 0.8, 10))]
    assert scores([(1.0, True)])["bins"] == [(1.0, 1.0, 1)]  # p = 1.0 falls in the last bin
    assert scores([]) is None


def _changing_run(name: str) -> WorldRun:
    n = 60
    run = WorldRun(name, "outage", n, events=[(10, "break"), (30, "recovery")])
    success = [i % 5 != 0 for i in range(n)]  # 80% succeed
    run.success = {"cost-blind": success, "learned-cautious": success, "oracle": [True] * n}
    run.expected = {"cost-blind": [0.8] * n, "learned-cautious": [0.8] * n, "oracle": [0.9] * n}
    run.predicted = {"learned-cautious": [None] * 10 + [0.8] * (n - 10)}
    learned = (
        [(1, 0)] * 10 + [(1, 1)] * 4 + [(0, 0)] * 16 + [(0, 0)] * 7 + [(1, 0)] * 23
    )  # leaves after 4, back after 7
    oracle = [(1, 0)] * 10 + [(0, 0)] * 20 + [(1, 0)] * 30
    run.watched = {"learned-cautious": learned, "oracle": oracle, "cost-blind": [(1, 1)] * n}
    run.shifts = {arm: shifts(run.events, w) for arm, w in run.watched.items()}
    return run


def test_the_report_gives_leave_return_and_calibration_beside_cost_blind_and_the_oracle():
    runs = [_changing_run("outage-1"), _changing_run("outage-2")]
    changes = summarise(runs, ["cautious"])["changes"]
    assert changes["leave"]["learned-cautious"] == {
        "events": 2, "median": 4, "max": 4, "within_target": 0, "never": 0, "episodes_median": 4,
    }  # fmt: skip
    assert changes["leave"]["oracle"]["median"] == 0 and changes["return"]["oracle"]["median"] == 0
    assert changes["return"]["learned-cautious"] == {
        "events": 2, "median": 7, "max": 7, "within_target": 2, "never": 0, "not_away": 0,
    }  # fmt: skip
    assert changes["leave"]["cost-blind"]["never"] == 2  # it stays on the broken road: no return to count
    assert changes["return"]["cost-blind"]["events"] == 0 and changes["return"]["cost-blind"]["not_away"] == 2
    assert plan_pairs(runs, "learned-cautious") == [(0.8, s) for s in runs[0].success["learned-cautious"][50:]] * 2
    calibration = changes["calibration"]
    assert calibration["learned-cautious"]["ece"] == pytest.approx(0.0) and calibration["learned-cautious"]["n"] == 20
    assert calibration["learned-cautious"]["brier"] == pytest.approx(0.16)  # 0.8 * 0.2^2 + 0.2 * 0.8^2
    assert calibration["cost-blind"]["ece"] == pytest.approx(0.2)  # predicts 1.0: its failure rate
    assert calibration["cost-blind"]["true_gap"] == pytest.approx(0.2)
    text = report({"outage": summarise(runs, ["cautious"])}, ["cautious"])
    assert "| outage | learned-cautious | 2 | 4 | 4 | 0 | 0 | 4 | 2 | 0 | 7 | 7 | 2 | 0 |" in text
    assert "| outage | cost-blind | 2 | 20 | 20 | 0 | 2 | n/a | 2 | 2 | n/a | n/a | 0 | 0 |" in text
    assert "| outage | cost-blind | 20 | 0.200 | 0.200 | 0.200 |" in text


def test_write_results_draws_the_reliability_diagram(tmp_path):
    from portfolio.benchsuite.worlds.report import write_results

    run = _changing_run("outage-1")
    for arm in run.success:
        run.true_cost[arm] = [1.0] * run.episodes
    paths = write_results({"outage": [run]}, ["cautious"], tmp_path)
    assert paths["reliability"].stat().st_size > 1000
    assert "Calibration of the predicted plan success" in paths["report"].read_text()
