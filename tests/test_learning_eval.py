"""The learning evaluation harness (benchmarks/experiments/learning_eval.py) keeps honest books: every step the
learned arm executes is in its trace store with the episode's situation, runs end with the episode's outcome, retrains
happen every K episodes, plans are valid, and the oracle's plans are at least as likely to succeed as the
cost-blind ones. Targets and timings are the benchmark's business (`make bench`), not asserted here."""

from __future__ import annotations

import math

import pytest

from benchmarks.experiments.learning_episodes import EpisodeSpec, execute, make_episodes, step_fails
from benchmarks.experiments.learning_eval import ARMS, evaluate, fresh_traces_path, report, true_p_fail, windows
from domains.bundled import bundled_task
from domains.model import GroundAction
from domains.validate import validate_plan
from traces.store import TraceStore

EPISODES, K, WINDOW = 20, 5, 10


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    traces = tmp_path_factory.mktemp("learning-eval") / "traces.db"
    return evaluate(EPISODES, K, WINDOW, seed=0, traces=traces, latency_rounds=0), traces


def test_world_is_situation_dependent_and_draws_are_shared():
    basic = GroundAction("web-search", ("job1", "pricing", "web-basic"))
    assert true_p_fail(basic, {"hour": "peak"}) == 0.80
    assert true_p_fail(basic, {"hour": "off-peak"}) == 0.04
    assert true_p_fail(GroundAction("connect-database", ("db-internal",)), {"region": "eu"}) == 0.75
    assert true_p_fail(GroundAction("fact-check", ("job1",)), {"hour": "peak"}) == 0.01
    # Common random numbers: the same (episode, step, occurrence) draws alike; p 0 and 1 are certain.
    assert step_fails(0, 3, basic, 0, 0.5) == step_fails(0, 3, basic, 0, 0.5)
    assert not step_fails(0, 3, basic, 0, 0.0) and step_fails(0, 3, basic, 0, 1.0)
    assert make_episodes(30, seed=1) == make_episodes(30, seed=1) != make_episodes(30, seed=2)


def test_execution_stops_at_the_first_failure():
    task = bundled_task("tools", 2, 0)
    plan = [GroundAction("web-search", ("job1", "x", "web-basic"))]  # not applicable: job1 is not about x
    with pytest.raises(RuntimeError, match="not applicable"):
        execute(task, plan, EpisodeSpec(0, 2, 0, {"hour": "peak"}), seed=0)
    about = {a.args[0]: a.args[1] for a in task.problem.init if a.predicate == "about"}
    plan = [GroundAction("web-search", ("job1", about["job1"], "web-basic")), GroundAction("fact-check", ("job1",))]
    always = execute(task, plan, EpisodeSpec(0, 2, 0, {"hour": "peak"}), seed=0)
    assert len(always.steps) <= 2 and not always.success  # job2 is never written: no success even without failure
    failed = [step for step, bad in always.steps if bad]
    assert len(failed) <= 1 and (not failed or always.steps[-1][1])


@pytest.mark.slow
def test_every_executed_step_of_the_learned_arm_is_recorded(run):
    evaluation, traces = run
    learned = evaluation.of("learned")
    assert [o.episode for o in learned] == list(range(EPISODES))
    with TraceStore(traces) as store:
        steps = list(store.iter_steps())
        assert len(steps) == sum(o.steps_executed for o in learned) > 0
        for outcome in learned:
            run_id = f"episode-{outcome.episode:04d}"
            mine = [s for s in steps if s.run_id == run_id]
            assert [s.ground for s in mine] == outcome.plan[: outcome.steps_executed]
            assert [s.step for s in mine] == list(range(outcome.steps_executed))
            assert all(s.features == outcome.context for s in mine)
            failures = [s.ground for s in mine if s.failed]
            assert failures == ([outcome.failed_step] if outcome.failed_step else [])
            assert outcome.success == (outcome.failed_step is None and outcome.solved)
            assert store.get_run(run_id).outcome == ("success" if outcome.success else "failure")
            assert store.plans(run_id)[0]["plan"] == outcome.plan
        assert store.latest_model().version == evaluation.model_versions == EPISODES // K


@pytest.mark.slow
def test_arms_play_the_same_episodes_with_valid_plans(run):
    evaluation, _ = run
    by_arm = {arm: evaluation.of(arm) for arm in ARMS}
    for arm in ARMS:
        assert len(by_arm[arm]) == EPISODES
    for i in range(EPISODES):
        assert len({(by_arm[a][i].size, by_arm[a][i].task_seed, str(by_arm[a][i].context)) for a in ARMS}) == 1
    for outcome in evaluation.outcomes:
        assert outcome.solved
        task = bundled_task("tools", outcome.size, outcome.task_seed)
        from domains.ground_text import parse_ground_action

        assert validate_plan(task, [parse_ground_action(s) for s in outcome.plan]).ok
        assert 0.0 < outcome.expected_success <= 1.0


@pytest.mark.slow
def test_oracle_plans_are_at_least_as_likely_to_succeed_as_cost_blind_ones(run):
    evaluation, _ = run
    # Expected success is the true probability of the chosen plan: free of execution luck. The oracle pays up to
    # lambda * -log(1 - p) per step for reliability, so over 20 episodes (half of them at peak hours, where the
    # cheap engine fails 80%) its plans must be more reliable on average.
    mean = {arm: sum(o.expected_success for o in evaluation.of(arm)) / EPISODES for arm in ARMS}
    assert mean["oracle"] > mean["cost-blind"] + 0.1


@pytest.mark.slow
def test_windows_and_report_add_up(run):
    evaluation, _ = run
    rows = windows(evaluation)
    assert [(r.first, r.last) for r in rows] == [(1, 10), (11, 20)]
    for arm in ARMS:
        overall = sum(o.success for o in evaluation.of(arm)) / EPISODES
        assert math.isclose(sum(r.success[arm] for r in rows) / len(rows), overall)
    text = report(evaluation)
    assert "| 1-10 |" in text and "| 11-20 |" in text and "## Targets" in text


@pytest.mark.slow
def test_an_existing_trace_store_is_refused_not_deleted(run, tmp_path):
    """The evaluation used to unlink an existing store and its -wal/-shm files by hand before a run."""
    _, traces = run
    size = traces.stat().st_size
    with pytest.raises(FileExistsError, match="already exists"):
        evaluate(2, 1, 1, seed=0, traces=traces, latency_rounds=0)
    assert traces.stat().st_size == size
    with TraceStore(traces) as store:
        assert store.count_steps() > 0
    first = fresh_traces_path(tmp_path)
    assert not first.exists()  # nothing is created until a run records into it
    first.touch()
    assert fresh_traces_path(tmp_path) != first
