"""The execute-observe-replan loop: triggers, hints, replan requests, veto, failure classes, concede, loops, and
every executed step in the (real, temporary) trace store."""

from __future__ import annotations

import pytest
from loop_world import B, C, D, SpyPlanner, Start, chain

from domains.ground_text import parse_ground_action
from domains.typed_actions import ReplanRequested, action, fact, replan_when
from domains.validate import validate_plan
from portfolio.agent import Agent
from portfolio.agent.failures import Category, Decision, Failure, InfeasibleFailure, TransientFailure, classify, decide
from portfolio.agent.loop_types import LoopConfig, divergence
from traces.store import TraceStore


def agent(actions, **options):
    options.setdefault("backoff_s", 0.0)
    return Agent(actions, warm=False, **options)


def executed_plan_is_valid(ag: Agent, result) -> bool:
    """The successful steps, replayed by the validator from the start, reach the goal."""
    task = ag.compiled(D, frozenset({fact(Start)}))
    plan = [parse_ground_action(s.action) for s in result.steps if s.outcome == "success"]
    return validate_plan(task, plan).ok


def test_no_failure_no_replan_on_failure_trigger():
    with agent(chain()) as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded and result.output == D()
    assert [s.action for s in result.steps] == ["(make-b)", "(make-c)", "(make-d)"]
    assert result.replans == []
    assert executed_plan_is_valid(ag, result)


def test_every_step_trigger_replans_after_each_step_but_the_last():
    with agent(chain(), trigger="every-step") as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded
    assert [r.trigger for r in result.replans] == ["every-step", "every-step"]
    assert [r.generation for r in result.replans] == [1, 2]
    assert [s.generation for s in result.steps] == [0, 1, 2]


def test_on_failure_trigger_refines_around_the_failed_action():
    with agent(chain(make_c=LookupError("no index"))) as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded and result.output == D()
    assert [(s.action, s.outcome, s.category, s.decision) for s in result.steps] == [
        ("(make-b)", "success", None, None),
        ("(make-c)", "failure", "knowledge", "refine"),
        ("(make-c-slowly)", "success", None, None),
        ("(make-d)", "success", None, None),
    ]
    (replan,) = result.replans
    assert replan.trigger == "failure" and "no index" in replan.reason
    assert replan.plan == ["(make-c-slowly)", "(make-d)"]
    assert executed_plan_is_valid(ag, result)


def two_outputs(second_missing: bool):
    @action(cost=1)
    def make_bc(s: Start) -> tuple[B, C]:
        return (B(), None if second_missing else C())

    @action(cost=1, goal=True)
    def make_d(b: B) -> D:
        return D()

    return [make_bc, make_d]


def test_progress_trigger_replans_when_divergence_exceeds_threshold():
    with agent(two_outputs(True), trigger="progress") as ag:  # 1 of 2 expected effects missing: 0.5 > 0.3
        result = ag.run(Start(), goal=D)
    assert result.succeeded
    assert result.steps[0].divergence == 0.5
    assert [r.trigger for r in result.replans] == ["progress"]
    assert "0.50" in result.replans[0].reason


def test_progress_trigger_stays_quiet_below_threshold_and_on_clean_runs():
    with agent(two_outputs(True), trigger="progress", threshold=0.6) as ag:
        assert ag.run(Start(), goal=D).replans == []
    with agent(two_outputs(False), trigger="progress") as ag:
        result = ag.run(Start(), goal=D)
    assert result.replans == [] and result.steps[0].divergence == 0.0


def test_divergence_is_the_share_of_expected_effects_not_observed():
    before = frozenset({fact(Start)})
    expected = before | {fact(B), fact(C)}
    assert divergence(before, expected, before | {fact(B)})[0] == 0.5
    assert divergence(before, expected, expected)[0] == 0.0
    assert divergence(before, before, before)[0] == 0.0  # nothing expected, nothing missed


def test_hint_always_replans_even_without_failure():
    actions = chain()
    actions[0] = action(actions[0].fn, cost=1, hint="always")
    with agent(actions) as ag:
        result = ag.run(Start(), goal=D)
    assert [r.trigger for r in result.replans] == ["hint"]
    assert result.replans[0].after_step == 0


def test_hint_never_suppresses_the_trigger_but_not_an_invalid_plan():
    actions = chain(make_c=LookupError("gone"))
    actions[1] = action(actions[1].fn, cost=1, hint="never")
    with agent(actions, trigger="every-step") as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded
    # after make-b: every-step; after the failed make-c (hint never): no trigger, then the plan's next step
    # (make-d) is not applicable, which forces a replan whatever the hint said.
    assert [r.trigger for r in result.replans][:2] == ["every-step", "plan-invalid"]


def test_hint_conditional_follows_the_trigger():
    actions = chain()
    actions[0] = action(actions[0].fn, cost=1, hint="conditional")
    with agent(actions, trigger="every-step") as ag:
        assert [r.trigger for r in ag.run(Start(), goal=D).replans] == ["every-step", "every-step"]


def test_replan_requested_applies_updates_first():
    actions = chain(make_b=ReplanRequested("a C came with the B", updates={B: B(7), C: C(8)}))
    with agent(actions) as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded
    assert [s.action for s in result.steps] == ["(make-b)", "(make-d)"]  # C was given: make-c never ran
    assert result.steps[0].outcome == "replan" and "replan requested" in result.steps[0].error
    (replan,) = result.replans
    assert (replan.trigger, replan.reason) == ("requested", "a C came with the B")
    assert replan.plan == ["(make-d)"]


def test_replan_when_wrapper_asks_for_a_replan():
    actions = chain()
    actions[0] = replan_when(lambda b: b.v == 1, reason="B looks stale")(actions[0])
    with agent(actions) as ag:
        result = ag.run(Start(), goal=D)
    assert [(r.trigger, r.reason) for r in result.replans] == [("requested", "B looks stale")]


def test_replan_when_below_action_decorator():
    @action(goal=True)
    @replan_when(lambda out: True)
    def finish(s: Start) -> D:
        return D()

    assert finish.replan_when is not None and "replan_when" in finish.replan_reason


def test_veto_discards_the_plan_and_routes_around_the_action():
    actions = chain()
    actions[1] = action(actions[1].fn, cost=1, side_effects=True)
    seen = []

    def check(step, state):
        seen.append(str(step))
        return "would send e-mail" if step.name == "make-c" else None

    with agent(actions, check=check) as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded
    assert "(make-c)" not in [s.action for s in result.steps]  # vetoed: never executed
    assert seen == ["(make-c)"]  # only side-effecting actions are checked
    (replan,) = result.replans
    assert replan.trigger == "veto" and "would send e-mail" in replan.reason


def test_veto_without_alternative_concedes():
    actions = chain()
    actions[3] = action(actions[3].fn, cost=1, goal=True, side_effects=True)
    with agent(actions, check=lambda step, state: False) as ag:
        result = ag.run(Start(), goal=D)
    assert result.status == "conceded" and "no plan" in result.reason


def test_transient_failure_is_retried_then_succeeds():
    calls = {"n": 0}

    @action(goal=True)
    def flaky(s: Start) -> D:
        calls["n"] += 1
        if calls["n"] < 3:
            raise TimeoutError("slow")
        return D()

    with agent([flaky], max_retries=2) as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded and calls["n"] == 3
    assert [(s.outcome, s.decision) for s in result.steps] == [
        ("failure", "persist"),
        ("failure", "persist"),
        ("success", None),
    ]
    assert result.replans == []


def test_transient_failure_with_side_effects_is_not_retried():
    actions = chain(make_c=TransientFailure("charged, then timed out", side_effects=True))
    with agent(actions) as ag:
        result = ag.run(Start(), goal=D)
    failure = next(s for s in result.steps if s.outcome == "failure")
    assert (failure.category, failure.decision) == ("transient", "refine")
    assert "side effects" in failure.critique
    assert result.succeeded


def test_side_effects_of_a_failure_reach_the_trace_store(tmp_path):
    """The loop records whether each failure left side effects (learned as a share, `learning.durations`);
    successes leave it unknown."""
    actions = chain(make_c=TransientFailure("charged, then timed out", side_effects=True))
    with agent(actions, traces=tmp_path / "t.db") as ag:
        result = ag.run(Start(), goal=D)
    with TraceStore(tmp_path / "t.db") as store:
        stored = {(s.ground, s.outcome): s.side_effects for s in store.iter_steps() if s.run_id == result.run_id}
    assert stored[("(make-c)", "failure")] is True
    assert stored[("(make-b)", "success")] is None


def test_infeasible_failure_concedes_at_once():
    with agent(chain(make_c=InfeasibleFailure("no licence"))) as ag:
        result = ag.run(Start(), goal=D)
    assert result.status == "conceded" and "no licence" in result.reason
    assert result.steps[-1].decision == "concede" and result.replans == []


def test_concede_after_max_adaptations():
    actions = chain(make_c=LookupError("a"), make_c_slowly=LookupError("b"))
    with agent(actions, max_adaptations=1) as ag:
        result = ag.run(Start(), goal=D)
    assert result.status == "conceded"
    assert [s.decision for s in result.steps if s.outcome == "failure"] == ["refine", "concede"]


def test_limits_on_steps_replans_and_time():
    with agent(chain(), max_steps=2) as ag:
        assert ag.run(Start(), goal=D).reason == "step limit reached (2)"
    with agent(chain(), trigger="every-step", max_replans=1) as ag:
        assert ag.run(Start(), goal=D).reason == "replan limit reached (1)"
    with agent(chain(), max_seconds=0.0) as ag:
        assert ag.run(Start(), goal=D).reason.startswith("time limit reached")


def test_loop_detection_excludes_an_action_that_makes_no_progress():
    @action(cost=1)
    def lazy_c(b: B) -> C:
        return None  # "succeeds" without producing anything

    actions = chain()
    actions[1] = lazy_c
    with agent(actions, loop_limit=2) as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded
    assert [s.action for s in result.steps].count("(lazy-c)") == 2
    assert "loop" in [r.trigger for r in result.replans]
    assert any(c.startswith("loop: (lazy-c)") for c in result.critiques)


def test_loop_without_alternative_concedes():
    @action(goal=True)
    def lazy(s: Start) -> D:
        return None

    with agent([lazy], loop_limit=1) as ag:
        result = ag.run(Start(), goal=D)
    assert result.status == "conceded" and len(result.steps) == 1


def test_classification_and_decisions():
    assert classify(TimeoutError()) == (Category.TRANSIENT, False)
    assert classify(ConnectionError()) == (Category.TRANSIENT, False)
    assert classify(PermissionError()) == (Category.INFEASIBLE, False)
    assert classify(KeyError("x")) == (Category.KNOWLEDGE, False)
    assert classify(RuntimeError("?")) == (Category.KNOWLEDGE, False)
    assert classify(TransientFailure("x", side_effects=True)) == (Category.TRANSIENT, True)
    transient = Failure("(a)", Category.TRANSIENT, False, "TimeoutError")
    assert decide(transient, 0, 2, 0, 5) is Decision.PERSIST
    assert decide(transient, 2, 2, 0, 5) is Decision.REFINE
    assert decide(transient, 2, 2, 5, 5) is Decision.CONCEDE
    assert decide(Failure("(a)", Category.INFEASIBLE, False, "x"), 0, 2, 0, 5) is Decision.CONCEDE


def test_critiques_reach_the_next_planning_call_and_the_critic_is_used():
    from portfolio.delegates.registry import AGENT_DELEGATES, build_stages
    from portfolio.planner import Planner

    with Planner(build_stages(AGENT_DELEGATES), warm=False) as real:
        spy = SpyPlanner(real)
        critic = lambda failure: f"LLM says: avoid {failure.action} ({failure.category.value})"  # noqa: E731
        with Agent(chain(make_c=LookupError("x")), planner=spy, critic=critic) as ag:
            result = ag.run(Start(), goal=D)
    assert spy.critiques == [[], ["LLM says: avoid (make-c) (knowledge)"]]
    assert result.steps[1].critique == "LLM says: avoid (make-c) (knowledge)"


def test_every_executed_step_reaches_the_trace_store(tmp_path):
    path = tmp_path / "traces.db"
    calls = {"n": 0}

    def flaky_c(b: B) -> C:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("once")
        raise LookupError("then gone")

    actions = chain()
    actions[1] = action(flaky_c, name="make-c", cost=1)
    with agent(actions, traces=path, trigger="every-step", features={"site": "eu"}) as ag:
        result = ag.run(Start(), goal=D)
    assert result.succeeded
    with TraceStore(path) as store:
        stored = [s for s in store.iter_steps() if s.run_id == result.run_id]
        assert len(stored) == len(result.steps) == 5
        assert [(s.step, s.ground, s.outcome, s.failure_category, s.generation) for s in stored] == [
            (r.step, r.action, r.outcome, r.category, r.generation) for r in result.steps
        ]
        assert stored[1].error and "once" in stored[1].error  # the critique goes into the trace
        assert stored[0].expected_effects == ["(known-b)"] and stored[0].observed_effects == ["(known-b)"]
        assert stored[2].observed_effects == []
        assert all(s.features == {"site": "eu"} for s in stored)
        assert len(store.plans(result.run_id)) == len(result.plans) == 1 + len(result.replans)
        assert store.get_run(result.run_id).outcome == "success"


def test_loop_config_rejects_unknown_trigger():
    with pytest.raises(ValueError, match="trigger must be one of"):
        LoopConfig(trigger="sometimes")
