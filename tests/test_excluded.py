"""Grounded actions are compared in one normal form: `excluded` works in every spelling, from Python and HTTP,
for every delegate."""

from __future__ import annotations

import re
import time

import pytest

from domains.bundled import bundled_task
from domains.errors import ArityError, UndefinedSymbolError
from domains.ground_text import ground_action_text, parse_ground_action
from domains.model import GroundAction
from domains.pddl_writer import domain_to_pddl, problem_to_pddl
from domains.validate import validate_plan
from portfolio.delegates.pyperplan import Pyperplan
from portfolio.delegates.typed_search import TypedSearch
from portfolio.engine.results import PlanRequest, Status

# In the cheapest plan of the task below (the default search returns it: `portfolio.delegates.fast_downward.anytime`).
SPELLINGS = [
    "query-database job1 pricing db-internal",
    "(query-database job1 pricing db-internal)",
    "( QUERY-DATABASE  job1 Pricing db-internal )",
    GroundAction("query-database", ("job1", "pricing", "db-internal")),
]
ACTION = "(query-database job1 pricing db-internal)"


@pytest.fixture(scope="module")
def tools():
    return bundled_task("tools", 3, seed=1)


def test_one_parser_one_printer():
    assert ground_action_text("pick-up a") == ground_action_text("(PICK-UP  A)") == "(pick-up a)"
    assert ground_action_text(GroundAction("Pick-Up", ("A",))) == "(pick-up a)"
    assert parse_ground_action("(noop)") == GroundAction("noop", ())
    for bad in ["", "()", "(a (b))"]:
        with pytest.raises(ValueError):
            parse_ground_action(bad)


def test_the_request_keeps_one_spelling():
    request = PlanRequest(task=None, excluded=frozenset(SPELLINGS[:3]), costs={"Drive T1 A B": 2.0})
    assert request.excluded == {ACTION}
    assert request.costs == {"(drive t1 a b)": 2.0}
    assert request.is_excluded(GroundAction("query-database", ("job1", "pricing", "db-internal")))


def test_the_unexcluded_plan_uses_the_action(classical_planner, tools):
    assert ACTION in classical_planner.plan(tools).plan


@pytest.mark.parametrize("spelling", SPELLINGS, ids=["bare", "pddl", "shouted", "ground-action"])
def test_excluded_in_any_spelling_is_never_used(classical_planner, tools, spelling):
    result = classical_planner.plan(tools, excluded=[spelling])
    assert result.solved and ACTION not in result.plan
    assert validate_plan(tools, result.actions()).ok


def test_typed_search_honours_the_bare_spelling(tools):
    with TypedSearch(max_ground_actions=10_000) as search:
        assert search.supports(tools)
        outcome = search.solve(PlanRequest(tools, excluded=frozenset({SPELLINGS[0]})), time.monotonic() + 10)
    assert outcome.status is Status.SOLVED
    assert ACTION not in [str(step) for step in outcome.plan]


def test_pyperplan_removes_excluded_operators_before_searching():
    from domains.pddl import parse_task

    domain = """(define (domain two) (:requirements :strips) (:predicates (s) (g))
      (:action a :parameters () :precondition (s) :effect (g))
      (:action b :parameters () :precondition (s) :effect (g)))"""
    task = parse_task(domain, "(define (problem p) (:domain two) (:init (s)) (:goal (g)))", "two.pddl", "p.pddl")
    with Pyperplan() as pyperplan:
        plans = {
            name: pyperplan.solve(PlanRequest(task, excluded=frozenset({name})), time.monotonic() + 10).plan
            for name in ("a", "(B)")
        }
    assert plans == {"a": [GroundAction("b")], "(B)": [GroundAction("a")]}


def test_pyperplan_declines_what_its_parser_cannot_read(tools):
    with Pyperplan() as pyperplan:
        assert not pyperplan.supports(tools)
        assert "without a precondition" in pyperplan.decline_reason(tools)


def test_excluded_over_http_in_both_spellings(tools):
    import httpx
    from test_service_helpers import config, serve_in_thread

    with serve_in_thread(config(delegates=["fast-downward", "pyperplan", "goal-agenda"])) as (url, _):
        body = {"domain": domain_to_pddl(tools.domain), "problem": problem_to_pddl(tools.problem)}
        for spelling in SPELLINGS[:2]:
            result = httpx.post(url + "/v1/plan", json={**body, "excluded": [spelling]}, timeout=60).json()
            assert result["status"] == "solved" and ACTION not in result["plan"]
        refused = httpx.post(url + "/v1/plan", json={**body, "excluded": ["(pick-up (a))"]}, timeout=60)
        assert refused.status_code == 400 and "not a grounded action" in refused.json()["error"]


@pytest.mark.parametrize(
    "spelling,error,message",
    [
        ("(query-databse job1 pricing db-internal)", UndefinedSymbolError, "unknown action 'query-databse'"),
        ("(query-database job1 pricing)", ArityError, "'query-database' takes 3 arguments, got 2"),
        ("(query-database job1 pricing db-intern)", UndefinedSymbolError, "unknown object 'db-intern'"),
    ],
)
def test_an_excluded_action_the_task_does_not_have_is_an_error(classical_planner, tools, spelling, error, message):
    """A misspelt exclusion used to exclude nothing without a word, and the plan used the action meant."""
    with pytest.raises(error, match=re.escape(message)):
        classical_planner.plan(tools, excluded=[spelling])
