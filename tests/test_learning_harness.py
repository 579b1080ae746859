"""The learning benchmark's harness (portfolio/benchsuite/worlds/runner.py) keeps honest books, here on the
`tools` world (the bundled tools domain with situation-dependent faults, the world the failure model was first
tuned on): every step a learned arm executes is in its trace store with the episode's situation, runs end with the
episode's outcome, retrains happen every K episodes, plans are valid, the exact oracle's plans are more likely to
succeed than cost-blind ones, an existing trace store is refused and left as it was, and warm latency is measured
apart from the episodes. Targets and timings are the benchmark's business (`make bench`), not asserted here."""

from __future__ import annotations

import math
import statistics

import pytest

from domains.bundled import bundled_task
from domains.ground_text import parse_ground_action
from domains.model import GroundAction
from domains.validate import validate_plan
from portfolio.benchsuite.worlds.family import make_world
from portfolio.benchsuite.worlds.report import report, summarise, window_rates
from portfolio.benchsuite.worlds.runner import execute, fails, run_world, trace_path
from portfolio.benchsuite.worlds.tools import true_p_fail
from traces.store import TraceStore

EPISODES, K, WINDOW, ROUNDS = 20, 5, 10, 3
ARMS = ("cost-blind", "learned-cautious", "oracle")
MODEL_PARAMS = {"half_life_steps": 500}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("learning-harness")
    world = make_world("tools", 0)
    out = run_world(world, EPISODES, K, ("cautious",), MODEL_PARAMS, latency_rounds=ROUNDS, traces_dir=folder)
    return world, out, trace_path(folder, world.name, "cautious")


class _Certain:
    """A hidden truth in which every step fails with probability `p` (0 or 1: the draw cannot matter)."""

    name = "certain"

    def __init__(self, p: float) -> None:
        self.p = p

    def p_fail(self, step, spec) -> float:
        return self.p


def test_the_tools_world_is_situation_dependent_and_its_draws_are_shared():
    basic = GroundAction("web-search", ("job1", "pricing", "web-basic"))
    assert true_p_fail(basic, {"hour": "peak"}) == 0.80
    assert true_p_fail(basic, {"hour": "off-peak"}) == 0.04
    assert true_p_fail(GroundAction("connect-database", ("db-internal",)), {"region": "eu"}) == 0.75
    assert true_p_fail(GroundAction("fact-check", ("job1",)), {"hour": "peak"}) == 0.01
    world = make_world("tools", 1)
    specs = [world.episode(i) for i in range(30)]
    assert world.p_fail(basic, next(s for s in specs if s.context["hour"] == "peak")) == 0.80
    # Common random numbers: the same (world, episode, step, occurrence) draws alike; p 0 and 1 are certain.
    assert [fails(world, s, basic, 0) for s in specs] == [fails(world, s, basic, 0) for s in specs]
    assert not fails(_Certain(0.0), specs[3], basic, 0) and fails(_Certain(1.0), specs[3], basic, 0)
    # Episodes are the same for a world's seed (a world made afresh, not the cached one) and differ between seeds;
    # both situations and all sizes occur.
    again, other = make_world.__wrapped__("tools", 1), make_world("tools", 2)
    assert specs == [again.episode(i) for i in range(30)] != [other.episode(i) for i in range(30)]
    assert {s.context["hour"] for s in specs} == {"peak", "off-peak"} and {s.size for s in specs} == {2, 3, 4}
    assert all(0 <= s.task_seed < 10 for s in specs)


def test_execution_stops_at_the_first_failure():
    world = make_world("tools", 0)
    task = bundled_task("tools", 2, 0)
    spec = world.episode(0)
    plan = [GroundAction("web-search", ("job1", "x", "web-basic"))]  # not applicable: job1 is not about x
    with pytest.raises(RuntimeError, match="not applicable"):
        execute(world, task, plan, spec)
    about = {a.args[0]: a.args[1] for a in task.problem.init if a.predicate == "about"}
    plan = [GroundAction("web-search", ("job1", about["job1"], "web-basic")), GroundAction("fact-check", ("job1",))]
    assert [failed for _, failed in execute(_Certain(0.0), task, plan, spec)] == [False, False]
    assert execute(_Certain(1.0), task, plan, spec) == [(plan[0], True)]  # stops at the failed step
    steps = execute(world, task, plan, spec)
    assert 1 <= len(steps) <= 2 and all(not failed for _, failed in steps[:-1])


@pytest.mark.slow
def test_every_executed_step_of_the_learned_arm_is_recorded(run):
    world, out, traces = run
    assert traces.exists()  # kept after the run, for `portfolio traces` and `portfolio costs`
    with TraceStore(traces) as store:
        steps = list(store.iter_steps())
        total = 0
        for index in range(EPISODES):
            spec = world.episode(index)
            task = world.task(spec)
            run_id = f"e{index}"
            plan = store.plans(run_id)[0]["plan"]
            actions = [parse_ground_action(s) for s in plan]
            assert validate_plan(task, actions).ok
            executed = execute(world, task, actions, spec)  # common random numbers: the same outcomes again
            mine = [s for s in steps if s.run_id == run_id]
            assert [s.ground for s in mine] == plan[: len(executed)]
            assert [s.step for s in mine] == list(range(len(executed)))
            assert all(s.features == spec.context for s in mine)
            assert [s.failed for s in mine] == [failed for _, failed in executed]
            success = not any(failed for _, failed in executed)
            assert out.success["learned-cautious"][index] == success
            assert store.get_run(run_id).outcome == ("success" if success else "failure")
            assert out.expected["learned-cautious"][index] == pytest.approx(
                math.prod(1 - world.p_fail(a, spec) for a in actions)
            )
            total += len(executed)
        assert len(steps) == total > 0  # the latency run records plans only, no steps
        assert store.latest_model().version == EPISODES // K
    from learning.retrain import load_latest

    with TraceStore(traces) as store:
        assert load_latest(store).get_params()["half_life_steps"] == MODEL_PARAMS["half_life_steps"]


@pytest.mark.slow
def test_arms_play_every_episode_and_the_oracle_is_more_reliable_than_cost_blind(run):
    _, out, _ = run
    for arm in ARMS:
        assert len(out.success[arm]) == len(out.expected[arm]) == EPISODES
        assert all(0.0 < p <= 1.0 for p in out.expected[arm])  # solved every episode
    # Expected success is the true probability of the chosen plan: free of execution luck. The oracle pays up to
    # lambda * -log(1 - p) per step for reliability, so over 20 episodes (about half of them at peak hours, where
    # the cheap engine fails 80%) its plans must be more reliable on average.
    mean = {arm: statistics.mean(out.expected[arm]) for arm in ARMS}
    assert mean["oracle"] > mean["cost-blind"] + 0.1, mean
    # The true cost is what the oracle minimises: no arm's plan is cheaper under the true model, episode by episode
    for arm in ARMS:
        assert len(out.true_cost[arm]) == EPISODES
        for mine, best in zip(out.true_cost[arm], out.true_cost["oracle"]):
            assert best is not None and mine is not None and mine >= best - 1e-6, (arm, mine, best)


@pytest.mark.slow
def test_windows_and_report_add_up(run):
    _, out, _ = run
    for arm in ARMS:
        rows = window_rates([out], arm, window=WINDOW)
        assert len(rows) == EPISODES // WINDOW
        assert math.isclose(statistics.mean(rows), statistics.mean(out.success[arm]))
    text = report({"tools": summarise([out], ["cautious"])}, ["cautious"])
    assert "| tools | 1 | cautious |" in text and "Warm latency" in text


@pytest.mark.slow
def test_warm_latency_is_measured_after_the_episodes(run):
    _, out, _ = run
    latency = out.latency["cautious"]
    assert latency["rounds"] == ROUNDS
    assert min(latency[k] for k in ("plain_ms", "recorded_ms", "learned_ms", "cost_lookup_cold_ms")) > 0
    for overhead, over, under in (
        ("overhead", "learned_ms", "recorded_ms"),
        ("store_overhead", "recorded_ms", "plain_ms"),
    ):
        ratio = latency[over] / latency[under]
        # The times are reported to 0.01 ms and the overheads from the times before rounding: on calls of about a
        # millisecond (the tools world's A* since its landmarks) that alone moves the ratio by up to ~0.01.
        rounding = 0.005 * (1 + ratio) / latency[under]
        assert latency[overhead] == pytest.approx(ratio - 1, abs=rounding + 1e-4)
    summary = summarise([out], ["cautious"])["cautious"]["latency"]
    assert summary["worlds"] == 1 and summary["overhead"]["median"] == latency["overhead"]
    assert summary["within_target"] == (latency["overhead"] <= 0.10)


@pytest.mark.slow
def test_an_existing_trace_store_is_refused_not_deleted(run, capsys):
    """A learned arm must start from an empty store; the old harness once unlinked an existing one by hand."""
    world, _, traces = run
    size = traces.stat().st_size
    with pytest.raises(FileExistsError, match="already exists"):
        run_world(world, 2, 1, ("cautious",), traces_dir=traces.parent)
    from portfolio.cli import main

    argv = ["bench", "learning", "--kinds", "tools", "--first-seed", "0", "--seeds", "1", "--policies", "cautious"]
    assert main([*argv, "--episodes", "2", "--traces", str(traces.parent), "--out", str(traces.parent)]) == 2
    assert "already exist" in capsys.readouterr().err
    assert traces.stat().st_size == size
    with TraceStore(traces) as store:
        assert store.count_steps() > 0


def test_bad_model_params_and_latency_rounds_are_refused(capsys, tmp_path):
    from portfolio.cli import main

    argv = ["bench", "learning", "--kinds", "tools", "--seeds", "1", "--out", str(tmp_path)]
    assert main([*argv, "--model-param", "prior_beta=1.9"]) == 2
    assert "unknown FailureModel parameter 'prior_beta'" in capsys.readouterr().err
    assert main([*argv, "--model-param", "half_life_steps=many"]) == 2
    assert "NAME=NUMBER" in capsys.readouterr().err
    assert main([*argv, "--latency-rounds", "-1"]) == 2
    assert "--latency-rounds must be >= 0" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before any world ran
