"""The adapters, each run with the real library through its example in `examples/`: every example must replan
around the failing flight tool and book the train. The executed steps are checked by the validator."""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from domains.ground_text import parse_ground_action
from domains.validate import validate_plan
from portfolio.agent import action

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def examples(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return lambda name: importlib.import_module(name)


def executed_steps_are_valid(travel, reports) -> bool:
    from portfolio.agent.adapters.session import Session

    session = Session(travel.TOOLS, goal=travel.Booking)
    try:
        start = session.start(travel.Trip("Oslo", "Rome"))
        steps = [parse_ground_action(r.action) for r in reports if r.outcome == "success"]
        return validate_plan(session.task(start), steps, init=start.facts).ok
    finally:
        session.close()


def test_langgraph_example_replans_around_the_failing_tool(examples):
    example, travel = examples("langgraph_replan"), examples("travel")
    final = asyncio.run(example.main())
    assert [(s.action, s.outcome) for s in final["steps"]] == [
        ("(find-flight)", "failure"),
        ("(find-train)", "success"),
        ("(book)", "success"),
    ]
    (replan,) = final["replans"]
    assert replan["after"] == "(find-flight)" and "airline API down" in replan["reason"]
    assert replan["plan"] == ["(find-train)", "(book)"]
    assert final["status"] == "success" and final["board"].objects["booking"] == travel.Booking("BK-TRAIN-89")
    assert executed_steps_are_valid(travel, final["steps"])


def test_langgraph_session_records_outcomes_and_concedes_without_a_route(examples, tmp_path):
    from portfolio.agent.adapters.langgraph import initial_state, planner_graph
    from portfolio.agent.adapters.session import Session
    from traces.store import TraceStore

    travel = examples("travel")
    with TraceStore(tmp_path / "t.db") as store:
        session = Session([travel.find_flight, travel.book], goal=travel.Booking, store=store)
        try:
            final = asyncio.run(planner_graph(session).compile().ainvoke(initial_state(session, travel.Trip("A", "B"))))
        finally:
            session.close()
        recorded = [(s.action, s.outcome, s.failure_category) for s in store.iter_steps()]
    assert final["status"] == "conceded" and "no plan" in final["reason"]
    assert recorded == [("find-flight", "failure", "transient")]


def test_pydantic_ai_example_uses_the_planner_tool_and_replans(examples):
    example, travel = examples("pydantic_ai_replan"), examples("travel")
    tools = asyncio.run(example.main())
    assert tools.plans[0] == ["(find-flight)", "(book)"] and tools.plans[1] == ["(find-train)", "(book)"]
    assert [(r.action, r.outcome) for r in tools.reports] == [
        ("(find-flight)", "failure"),
        ("(find-train)", "success"),
        ("(book)", "success"),
    ]
    assert tools.output("booking") == travel.Booking("BK-TRAIN-89")
    assert executed_steps_are_valid(travel, tools.reports)


@pytest.mark.slow
def test_mcp_example_plans_reports_and_replans_through_portfolio_mcp(examples, tmp_path):
    from traces.store import TraceStore

    example, travel = examples("mcp_replan"), examples("travel")
    log = asyncio.run(example.main(str(tmp_path / "server.db")))
    assert {"plan", "record_steps"} <= set(log["tools"])
    assert log["plans"] == [["(find-flight)", "(book)"], ["(find-train)", "(book)"]]
    assert [(s.action, s.outcome) for s in log["steps"]] == [
        ("(find-flight)", "failure"),
        ("(find-train)", "success"),
        ("(book)", "success"),
    ]
    assert log["booking"] == travel.Booking("BK-TRAIN-89")
    assert executed_steps_are_valid(travel, log["steps"])
    with TraceStore(tmp_path / "server.db") as store:  # what the server recorded from record_steps
        assert [(s.action, s.outcome) for s in store.iter_steps()] == [
            ("find-flight", "failure"),
            ("find-train", "success"),
            ("book", "success"),
        ]


@dataclass
class City:
    name: str


@dataclass
class Ticket:
    route: str


@action(goal=True)
async def route(source: City, target: City) -> Ticket:
    return Ticket(f"{source.name} -> {target.name}")


def test_langgraph_graph_binds_named_inputs():
    from portfolio.agent.adapters.langgraph import initial_state, planner_graph
    from portfolio.agent.adapters.session import Session

    session = Session([route], goal=Ticket)
    try:
        state = initial_state(session, source=City("Oslo"), target=City("Rome"))
        final = asyncio.run(planner_graph(session).compile().ainvoke(state))
    finally:
        session.close()
    assert final["status"] == "success" and final["board"].objects["ticket"] == Ticket("Oslo -> Rome")
