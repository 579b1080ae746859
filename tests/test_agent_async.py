"""Async agents: coroutine actions awaited natively, `Agent.arun`, `Planner.aplan`, per-action timeouts that cancel
the coroutine, many agents on one planner, and the ReplanRequested outcome in the trace store."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from domains.ground_text import parse_ground_action
from domains.typed_actions import ReplanRequested, TypedActionError, action, fact
from domains.validate import validate_plan
from portfolio.agent import Agent
from portfolio.delegates.registry import AGENT_DELEGATES, build_stages
from portfolio.planner import Planner


@dataclass
class Query:
    text: str


@dataclass
class Page:
    text: str


@dataclass
class Answer:
    text: str


@action(cost=1.0)
async def search(q: Query) -> Page:
    await asyncio.sleep(0)
    return Page(f"page about {q.text}")


@action(goal=True)
def summarise(page: Page) -> Answer:  # a plain function next to coroutine actions
    return Answer(page.text.upper())


START = frozenset({fact(Query)})


def executed_plan_is_valid(agent: Agent, result) -> bool:
    steps = [parse_ground_action(s.action) for s in result.steps if s.outcome == "success"]
    return validate_plan(agent.compiled(Answer, START), steps, init=START).ok


def test_arun_awaits_coroutine_actions_and_returns_the_goal_object():
    async def main():
        with Agent([search, summarise], warm=False) as agent:
            result = await agent.arun(Query("tides"))
            return agent, result

    agent, result = asyncio.run(main())
    assert result.succeeded and result.output == Answer("PAGE ABOUT TIDES")
    assert [(s.action, s.outcome) for s in result.steps] == [("(search)", "success"), ("(summarise)", "success")]
    assert executed_plan_is_valid(agent, result)


def test_sync_run_accepts_coroutine_actions_but_not_inside_an_event_loop():
    with Agent([search, summarise], warm=False) as agent:
        assert agent.run(Query("tides")).output == Answer("PAGE ABOUT TIDES")

        async def inside():
            return agent.run(Query("tides"))

        with pytest.raises(RuntimeError, match="await agent.arun"):
            asyncio.run(inside())


def test_timeout_cancels_the_coroutine_and_the_agent_routes_around_it():
    cancelled = []

    @action(cost=1.0, timeout=0.05)
    async def slow_search(q: Query) -> Page:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(q.text)
            raise
        return Page("never")

    @action(cost=5.0)
    async def cached_search(q: Query) -> Page:
        return Page(f"cached {q.text}")

    async def main():
        with Agent([slow_search, cached_search, summarise], warm=False, max_retries=0) as agent:
            return await agent.arun(Query("tides"))

    result = asyncio.run(main())
    assert result.succeeded and result.output == Answer("CACHED TIDES")
    first = result.steps[0]
    assert (first.action, first.outcome, first.category) == ("(slow-search)", "failure", "transient")
    assert "timed out after 0.05 s" in first.error
    assert cancelled == ["tides"]  # the coroutine itself saw the cancellation
    assert [r.trigger for r in result.replans] == ["failure"] and "(slow-search)" not in result.replans[0].plan


def test_timeout_is_retried_when_transient_and_a_later_attempt_is_fast():
    calls = []

    @action(goal=True, timeout=0.05)
    async def flaky(q: Query) -> Answer:
        calls.append(1)
        await asyncio.sleep(30 if len(calls) == 1 else 0)
        return Answer("ok")

    async def main():
        with Agent([flaky], warm=False, max_retries=1, backoff_s=0.0) as agent:
            return await agent.arun(Query("x"))

    result = asyncio.run(main())
    assert result.succeeded and [(s.outcome, s.decision) for s in result.steps] == [
        ("failure", "persist"),
        ("success", None),
    ]


def test_timeout_needs_a_coroutine_action():
    def plain(q: Query) -> Page: ...

    with pytest.raises(TypedActionError, match="timeout needs an async def action"):
        action(timeout=1.0)(plain)
    with pytest.raises(TypedActionError, match="timeout needs"):
        action(timeout=0)(search.fn)


def test_many_agents_share_one_planner_concurrently():
    """Every agent waits inside its action until all of them have arrived there: this finishes only if the runs
    really interleave on the event loop (sequential runs would wait forever, and time out)."""
    count = 30

    async def main():
        arrived = 0
        everyone = asyncio.Event()

        @action(cost=1.0)
        async def gather_round(q: Query) -> Page:
            nonlocal arrived
            arrived += 1
            if arrived == count:
                everyone.set()
            await asyncio.wait_for(everyone.wait(), timeout=30)
            return Page(q.text)

        with Planner(build_stages(AGENT_DELEGATES), warm=False) as planner:
            agents = [Agent([gather_round, summarise], planner=planner) for _ in range(count)]
            results = await asyncio.gather(*(a.arun(Query(f"q{i}")) for i, a in enumerate(agents)))
            direct = await planner.aplan(agents[0].compiled(Answer, START))
        return results, direct

    results, direct = asyncio.run(main())
    assert [r.output for r in results] == [Answer(f"Q{i}") for i in range(count)]
    assert direct.solved and direct.plan == ["(gather-round)", "(summarise)"]


def test_replan_requested_is_recorded_with_outcome_replan_in_the_trace_store(tmp_path):
    from traces.store import TraceStore

    @action(cost=1.0)
    async def fetch(q: Query) -> Page:
        raise ReplanRequested("the index moved", updates={Page: Page("moved")})

    async def main():
        with Agent([fetch, summarise], traces=tmp_path / "t.db", warm=False) as agent:
            return await agent.arun(Query("x"))

    result = asyncio.run(main())
    assert result.succeeded and result.output == Answer("MOVED")
    with TraceStore(tmp_path / "t.db") as store:
        outcomes = [(s.action, s.outcome) for s in store.iter_steps()]
    assert outcomes == [("fetch", "replan"), ("summarise", "success")]


def test_pddl_agent_awaits_coroutine_handlers():
    from domains.pddl import parse_task

    domain = """(define (domain two) (:requirements :strips)
      (:predicates (a) (done))
      (:action first :parameters () :effect (a))
      (:action finish :parameters () :precondition (a) :effect (done)))"""
    task = parse_task(domain, "(define (problem p) (:domain two) (:init) (:goal (done)))")
    seen = []

    async def first():
        await asyncio.sleep(0)
        seen.append("first")

    async def main():
        with Agent.for_task(task, {"first": first, "finish": lambda: seen.append("finish")}, warm=False) as agent:
            return await agent.arun()

    result = asyncio.run(main())
    assert result.succeeded and seen == ["first", "finish"]


def test_an_async_veto_check_works_in_run_and_arun():
    @action(goal=True, side_effects=True, cost=1.0)
    async def wire(q: Query) -> Answer:
        return Answer("wired")

    @action(goal=True, cost=2.0)
    def mail(q: Query) -> Answer:
        return Answer("mailed")

    async def check(step, state):
        await asyncio.sleep(0)
        return "no wires today" if step.name == "wire" else None

    with Agent([wire, mail], goal=Answer, check=check, warm=False) as agent:
        assert agent.run(Query("x")).output == Answer("mailed")
        result = asyncio.run(agent.arun(Query("x")))
    assert result.output == Answer("mailed") and "no wires today" in result.replans[0].reason
