"""Give-up reasons a person can act on: a trip-booking agent that concedes names the cause -
every flight provider failed (and how), an async action timed out three times, the goal needs a type no action
produces - instead of one "unsolvable ... reachable states exhausted" for all three; and a failure's critique
says what the loop does about it (a retried transient failure is not "prefer another way now")."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from domains.ground_text import parse_ground_action
from domains.typed_actions import action, fact
from domains.validate import validate_plan
from portfolio.agent import Agent
from portfolio.agent.failures import KnowledgeFailure, TransientFailure


@dataclass
class Trip:
    destination: str


@dataclass
class Flights:
    options: tuple


@dataclass
class Hotel:
    name: str


@dataclass
class Booking:
    ref: str


START = frozenset({fact(Trip)})


@action(cost=1.0)
def search_a(trip: Trip) -> Flights:
    raise TransientFailure("provider A: 503 service unavailable")


@action(cost=2.0)
def search_b(trip: Trip) -> Flights:
    raise KnowledgeFailure(f"provider B: no route to {trip.destination}")


@action(goal=True)
def book(trip: Trip, flights: Flights) -> Booking:
    return Booking("B-1")


def test_every_provider_failing_is_named_with_what_happened_to_each():
    with Agent([search_a, search_b, book], warm=False, backoff_s=0.0) as agent:
        result = agent.run(Trip("Oslo"))
    assert result.status == "conceded"
    assert result.reason.startswith("no plan: every action producing Flights failed: "), result.reason
    assert "(search-a) failed: transient x3 (TransientFailure: provider A: 503 service unavailable)" in result.reason
    assert "(search-b) failed: knowledge x1 (KnowledgeFailure: provider B: no route to Oslo)" in result.reason
    assert "(planner: unsolvable" in result.reason  # the planner's own words are kept, after the cause


def test_an_async_action_timing_out_three_times_says_so():
    @action(cost=1.0, timeout=0.02)
    async def search_slow(trip: Trip) -> Flights:
        await asyncio.sleep(30)
        return Flights(())

    async def main():
        with Agent([search_slow, book], warm=False, backoff_s=0.0) as agent:
            return await agent.arun(Trip("Oslo"))

    result = asyncio.run(main())
    assert result.status == "conceded"
    assert result.reason.startswith(
        "no plan: every action producing Flights failed: (search-slow) timed out 3 times"
    ), result.reason


def test_a_goal_type_no_action_produces_is_named():
    @action(goal=True)
    def book_with_hotel(trip: Trip, flights: Flights, hotel: Hotel) -> Booking:
        return Booking("B-2")

    @action(cost=1.0)
    def search_ok(trip: Trip) -> Flights:
        return Flights(("SK123",))

    with Agent([search_ok, book_with_hotel], warm=False) as agent:
        result = agent.run(Trip("Oslo"))
    assert result.status == "conceded" and result.reason.startswith("no plan: no action produces Hotel"), result.reason


def test_the_critique_matches_the_decision():
    calls = []

    @action(cost=1.0)
    def search_flaky(trip: Trip) -> Flights:
        calls.append(1)
        if len(calls) <= 3:
            raise TransientFailure("provider A: 503")
        return Flights(("SK123",))

    @action(cost=5.0)
    def search_backup(trip: Trip) -> Flights:
        return Flights(("DY456",))

    with Agent([search_flaky, search_backup, book], warm=False, backoff_s=0.0) as agent:
        result = agent.run(Trip("Oslo"))
        task = agent.compiled(Booking, START)
    assert result.succeeded
    failed = [s for s in result.steps if s.outcome == "failure"]
    assert [s.decision for s in failed] == ["persist", "persist", "refine"]
    for step in failed[:2]:
        assert "retrying it" in step.critique and "another way" not in step.critique, step.critique
    assert "prefer another way now" in failed[2].critique and "retrying" not in failed[2].critique
    assert result.critiques == [failed[2].critique]  # only the refined one goes to the planner
    done = [parse_ground_action(s.action) for s in result.steps if s.outcome == "success"]
    assert [str(a) for a in done] == ["(search-backup)", "(book)"]
    assert validate_plan(task, done, init=START).ok


def test_a_vetoed_provider_is_named_as_ruled_out_not_as_failed():
    @action(cost=2.0, side_effects=True)
    def search_paid(trip: Trip) -> Flights:
        return Flights(("LH1",))

    def no_paid_searches(step, state):
        return "no budget for paid searches" if step.name == "search-paid" else True

    with Agent([search_a, search_paid, book], warm=False, backoff_s=0.0, check=no_paid_searches) as agent:
        result = agent.run(Trip("Oslo"))
    assert result.status == "conceded"
    assert result.reason.startswith("no plan: every action producing Flights failed or was ruled out: "), result.reason
    assert "(search-a) failed: transient x3" in result.reason and "(search-paid) ruled out (vetoed" in result.reason


def test_a_derived_goal_is_not_called_unproducible():
    """Derived predicates come from rules, not actions: the cause finder counts them as produced."""
    from domains.model import Atom
    from domains.pddl import parse_task
    from portfolio.agent.give_up import give_up_reason

    domain = """(define (domain d) (:requirements :strips :derived-predicates)
      (:predicates (a) (b) (done) (never))
      (:derived (done) (and (b)))
      (:action make-b :parameters () :precondition (a) :effect (b)))"""
    problem = "(define (problem p) (:domain d) (:init (a)) (:goal (and (done) (never))))"
    task = parse_task(domain, problem, "d.pddl", "p.pddl")
    assert give_up_reason(task, frozenset({Atom("a")}), [], []) == "no action produces (never)"
