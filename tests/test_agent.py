"""Typed actions compiled to tasks, the in-process exact delegate, PDDL-backed agents, learned costs across runs,
observability and the demo."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import pytest

from domains.bundled import bundled_task
from domains.bundled.tools_sim import Request, WriteUp, make_tools
from domains.model import Atom, plan_cost
from domains.pddl import parse_task
from domains.typed_actions import TypedActionError, action, compile_actions, fact, kebab
from domains.validate import validate_plan
from portfolio.agent import Agent
from portfolio.delegates.registry import AGENT_DELEGATES, build_stages
from portfolio.delegates.typed_search import TypedSearch
from portfolio.engine.results import PlanRequest, Status


@dataclass
class UserInput:
    text: str


@dataclass
class Person:
    name: str


@dataclass
class News:
    items: tuple


@dataclass
class WriteUpDoc:
    text: str


@action(cost=1.0)
def find_person(text: UserInput) -> Person:
    return Person(text.text.split()[0])


@action(cost=2.5)
def fetch_news(person: Person) -> News:
    return News((f"{person.name} news",))


@action(goal=True)
def write_up(person: Person, news: News) -> WriteUpDoc:
    return WriteUpDoc(f"{person.name}: {news.items[0]}")


def test_compiled_task_has_known_facts_costs_and_round_trips():
    task = compile_actions([find_person, fetch_news, write_up], [WriteUpDoc], [fact(UserInput)])
    assert {p.name for p in task.domain.predicates} == {
        "known-user-input",
        "known-person",
        "known-news",
        "known-write-up-doc",
    }
    assert task.problem.init == frozenset({Atom("known-user-input")})
    assert [s.cost for s in task.domain.actions] == [1.0, 2.5, 1.0]
    assert "(increase (total-cost) 25)" in task.domain_pddl  # Fast Downward reads integers: scaled by 10
    parsed = parse_task(task.domain_pddl, task.problem_pddl)
    assert parsed.problem == task.problem and [a.name for a in parsed.domain.actions] == [
        "find-person",
        "fetch-news",
        "write-up",
    ]


def test_compile_errors_are_precise():
    def untyped(x) -> Person: ...

    with pytest.raises(TypedActionError, match="parameter 'x' needs a class annotation"):
        action(untyped)
    with pytest.raises(TypedActionError, match="hint must be one of"):
        action(hint="sometimes")(find_person.fn)
    with pytest.raises(TypedActionError, match="repeated: find-person"):
        compile_actions([find_person, find_person], [Person])
    with pytest.raises(TypedActionError, match="a goal is needed"):
        compile_actions([find_person], [])
    assert kebab("UserInput") == "user-input" and kebab("fetch_news") == "fetch-news"


@pytest.mark.parametrize("cost", [float("inf"), float("nan"), -1.0, "cheap"])
def test_a_cost_that_is_not_a_finite_number_is_refused_at_the_decorator(cost):
    """`@action(cost=float("inf"))` used to be accepted and end the first run in an OverflowError traceback
    (compiling the costs to whole numbers); `cost="cheap"` was a bare `'>=' not supported` TypeError."""
    with pytest.raises(TypedActionError, match=r"cost must be a finite number >= 0, got"):
        action(cost=cost)(find_person.fn)


def test_typed_search_finds_the_cheapest_plan_and_honours_exclusions():
    @action(cost=1.0)
    def cheap_news(person: Person) -> News: ...

    task = compile_actions([find_person, fetch_news, cheap_news, write_up], [WriteUpDoc], [fact(UserInput)])
    search = TypedSearch()
    outcome = search.solve(PlanRequest(task), deadline=float("inf"))
    assert outcome.status is Status.SOLVED and [str(a) for a in outcome.plan] == [
        "(find-person)",
        "(cheap-news)",
        "(write-up)",
    ]
    assert validate_plan(task, outcome.plan).ok
    outcome = search.solve(PlanRequest(task, excluded=frozenset({"(cheap-news)"})), deadline=float("inf"))
    assert "(fetch-news)" in [str(a) for a in outcome.plan] and validate_plan(task, outcome.plan).ok
    learned = {"(cheap-news)": 9.0, "(fetch-news)": 2.5, "(find-person)": 1.0, "(write-up)": 1.0}
    outcome = search.solve(PlanRequest(task, costs=learned), deadline=float("inf"))
    assert "(fetch-news)" in [str(a) for a in outcome.plan]
    gone = frozenset({"(cheap-news)", "(fetch-news)"})
    assert search.solve(PlanRequest(task, excluded=gone), deadline=float("inf")).status is Status.UNSOLVABLE


def test_typed_search_is_optimal_on_a_bundled_pddl_domain(planner):
    task = bundled_task("tools", 2, 0)
    ours = TypedSearch(max_ground_actions=1000).solve(PlanRequest(task), deadline=float("inf"))
    assert ours.status is Status.SOLVED and validate_plan(task, ours.plan).ok
    theirs = planner.plan(task)
    assert theirs.solved and plan_cost(task, ours.plan) <= theirs.cost


def test_typed_search_declines_large_tasks_and_searches_non_strips_ones():
    small = TypedSearch(max_ground_actions=10)
    assert not small.supports(bundled_task("blocksworld", 6, 0))
    assert small.solve(PlanRequest(bundled_task("blocksworld", 6, 0)), float("inf")).status is Status.UNSUPPORTED
    domain = """(define (domain lights) (:requirements :strips :negative-preconditions)
      (:predicates (on) (done))
      (:action switch-on :parameters () :precondition (not (on)) :effect (on))
      (:action finish :parameters () :precondition (on) :effect (done)))"""
    problem = "(define (problem p) (:domain lights) (:init) (:goal (done)))"
    task = parse_task(domain, problem)
    outcome = TypedSearch().solve(PlanRequest(task), float("inf"))
    assert [str(a) for a in outcome.plan] == ["(switch-on)", "(finish)"] and validate_plan(task, outcome.plan).ok


def test_agent_run_returns_the_goal_object_and_uses_the_goal_action_by_default():
    with Agent([find_person, fetch_news, write_up], warm=False) as agent:
        result = agent.run(UserInput("Ada Lovelace"))
        assert result.succeeded and result.output == WriteUpDoc("Ada: Ada news")
        assert [(s.action, s.outcome, s.error) for s in result.steps] == [
            ("(find-person)", "success", None),
            ("(fetch-news)", "success", None),
            ("(write-up)", "success", None),
        ]
        # each step timed on its own, in ms, within the run's time
        assert sum(s.ms for s in result.steps) <= result.elapsed_ms
        with pytest.raises(ValueError, match="no action takes a int"):
            agent.run(42)


def test_pddl_backed_agent_binds_handlers_to_action_names():
    task = bundled_task("tools", 1, 0)
    calls = []

    def handler(name, fail=None):
        def run(*args):
            calls.append((name, args))
            if fail == args:
                raise ConnectionError(f"{name} {' '.join(args)} is down")

        return run

    names = [s.name for s in task.domain.actions]
    first = Agent.for_task(task, {n: handler(n) for n in names}, warm=False)
    with first:
        plan = first.planner.plan(task)
    cheapest = plan.actions()[0]
    handlers = {n: handler(n, fail=(cheapest.args if n == cheapest.name else None)) for n in names}
    with Agent.for_task(task, handlers, hints={"write-report": "never"}, max_retries=0) as agent:
        result = agent.run()
    assert result.succeeded
    assert result.steps[0].outcome == "failure" and result.steps[0].category == "transient"
    assert [r.trigger for r in result.replans] == ["failure"]
    assert str(cheapest) not in result.replans[0].plan and str(cheapest) == result.steps[0].action
    with pytest.raises(ValueError, match="missing"):
        Agent.for_task(task, {"web-search": handler("x")}, warm=False)


def test_pddl_handler_reporting_partial_effects_counts_as_divergence():
    domain = """(define (domain two) (:requirements :strips)
      (:predicates (a) (b) (done))
      (:action both :parameters () :effect (and (a) (b)))
      (:action finish :parameters () :precondition (a) :effect (done)))"""
    task = parse_task(domain, "(define (problem p) (:domain two) (:init) (:goal (done)))")
    handlers = {"both": lambda: ["(a)"], "finish": lambda: None}
    with Agent.for_task(task, handlers, trigger="progress", warm=False) as agent:
        result = agent.run()
    assert result.succeeded and result.steps[0].divergence == 0.5
    assert [r.trigger for r in result.replans] == ["progress"]


def test_learned_costs_take_over_across_runs(tmp_path):
    tools = make_tools(seed=0, outage=1.0)  # the wire is down for good
    firsts = []
    with Agent(tools, traces=tmp_path / "traces.db", cost_weight=2.0, backoff_s=0.0, max_retries=1) as agent:
        for _ in range(4):
            result = agent.run(Request("About Grace Hopper"), goal=WriteUp)
            assert result.succeeded and result.output.text.startswith("Grace Hopper")
            firsts.append(next(s.action for s in result.steps if "fetch" in s.action))
            agent.learn()
    assert firsts[0] == "(fetch-wire)"  # cheapest by base cost
    assert firsts[-1] == "(fetch-archive)"  # the learned cost of the failing wire now outweighs its base cost


def test_learn_every_retrains_as_runs_accumulate_and_costs_shows_the_prices(tmp_path):
    """`Agent(learn_every=N)` retrains after every N finished runs without a call to `learn()`; `costs()` shows
    each grounded action's p_fail and cost for the task a run would plan."""
    tools = make_tools(seed=0, outage=1.0)  # the wire is down for good
    firsts = []
    with Agent(
        tools, traces=tmp_path / "traces.db", cost_weight=2.0, backoff_s=0.0, max_retries=1, learn_every=2
    ) as agent:
        assert agent.costs(Request("About Grace Hopper"), goal=WriteUp) == {}  # nothing learned yet
        for run in range(4):
            result = agent.run(Request("About Grace Hopper"), goal=WriteUp)
            assert result.succeeded
            firsts.append(next(s.action for s in result.steps if "fetch" in s.action))
            assert (agent.planner.model is None) == (run < 1)  # retrained after runs 2 and 4
        costs = agent.costs(Request("About Grace Hopper"), goal=WriteUp)
    assert firsts[0] == "(fetch-wire)" and firsts[-1] == "(fetch-archive)"
    assert costs["(fetch-wire)"].p_fail > costs["(fetch-archive)"].p_fail + 0.2
    assert costs["(fetch-wire)"].cost > costs["(fetch-archive)"].cost
    with pytest.raises(ValueError, match="learn_every"):
        Agent(tools, learn_every=2, warm=False)
    with pytest.raises(ValueError, match="learn_every"):
        Agent(tools, traces=tmp_path / "t2.db", learn_every=0, warm=False)


def test_events_and_counters(caplog):
    caplog.set_level(logging.INFO, logger="portfolio.events")
    with Agent([find_person, fetch_news, write_up], warm=False, trigger="every-step") as agent:
        agent.run(UserInput("Ada Lovelace"))
        snapshot = agent.counters.snapshot()
    events = [r.event for r in caplog.records if r.name == "portfolio.events"]
    assert events == ["plan", "step", "replan", "step", "replan", "step", "run"]
    replan = next(r for r in caplog.records if getattr(r, "event", None) == "replan")
    assert replan.fields["trigger"] == "every-step" and "reason=" in replan.getMessage()
    assert snapshot == {"replans": {"every-step": 2}, "steps": {"success": 3}}


def test_the_agent_cascade_puts_the_exact_search_first():
    (tier,) = build_stages(AGENT_DELEGATES)
    try:
        assert [d.name for d in tier.delegates] == ["typed-search", "fast-downward", "pyperplan"]
    finally:
        tier.close()


def test_demo_runs_and_shows_replanning_and_learning(capsys):
    from portfolio.commands.demo import main

    assert main(["--runs", "3"]) == 0
    out = capsys.readouterr().out
    assert "replan (failure" in out and "first news tool (fetch-archive)" in out
    # the failing tool ends clearly dearer than the one that works
    last = [line for line in out.splitlines() if "learned costs:" in line][-1]
    prices = dict(re.findall(r"\((fetch-\w+)\) ([0-9.]+) \(p_fail", last))
    assert float(prices["fetch-wire"]) > 1.3 * float(prices["fetch-archive"]), last
    # and says why: 3 failures in 3 calls of a lone tool make it more likely broken than not
    wire = re.search(r"\(fetch-wire\) [0-9.]+ \(p_fail ([0-9.]+), 90% ([0-9.]+)-([0-9.]+), 3 of 3 failed\)", last)
    assert wire is not None and float(wire.group(1)) >= 0.5, last
    assert float(wire.group(2)) < float(wire.group(1)) < float(wire.group(3))
    assert "docs/learning.md" in out


@pytest.fixture(scope="module")
def span_exporter():
    """The real OpenTelemetry SDK (a dev dependency) with an in-memory exporter on the global tracer."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    exporter.clear()


def test_spans_when_opentelemetry_is_present(span_exporter):
    span_exporter.clear()

    @action(cost=1.0)
    def broken_news(person: Person) -> News:
        raise LookupError("no index")

    with Agent([find_person, broken_news, fetch_news, write_up], warm=False) as agent:
        assert agent.run(UserInput("Ada Lovelace")).succeeded
    spans = sorted(span_exporter.get_finished_spans(), key=lambda s: s.start_time)
    names = [s.name for s in spans]
    assert names == [
        "portfolio.run",
        "portfolio.plan",
        "portfolio.step",
        "portfolio.step",
        "portfolio.replan",
        "portfolio.step",
        "portfolio.step",
    ]
    run = spans[0]
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in spans[1:])
    replan = spans[4].attributes
    assert replan["trigger"] == "failure" and "no index" in replan["reason"] and replan["status"] == "solved"
    assert spans[3].attributes["outcome"] == "failure" and spans[3].attributes["category"] == "knowledge"
