"""LangGraph adapter: a planner node that picks the next step from the graph's state, one node per typed action,
and the routing between them.

    graph = planner_graph(Session([find_flight, find_train, book], goal=Booking)).compile()
    final = await graph.ainvoke(initial_state(session, Trip("Oslo", "Rome")))
    final["board"].objects["booking"], final["steps"], final["replans"]

The graph is `START -> planner -> <action> -> planner -> ... -> END`. The planner node asks the shared
`Planner` for a validated plan from the board in the graph state (every time: a replan costs about a
millisecond, see `benchmarks/bench_replan.py`) and routes to the plan's first action; an action node runs
the action (`Session.execute`) and appends its `StepReport` to `steps`. A failed action is excluded on the board
with a critique, so the next planner visit routes around it and appends a `replans` entry naming the failure.
The graph ends when the goal holds (`status` "success") or no plan is left ("conceded"). Graph state holds
live Python objects, so use it without a checkpointer or with one that can pickle them. LangGraph is imported
when a graph is built, never at module import.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from portfolio.agent.adapters.session import Board, Session, StepReport

PLANNER = "planner"


class PlannerState(TypedDict, total=False):
    board: Board
    next: str | None  # the action node the planner routes to; None: end
    plan: list[str]
    status: str  # "", "success", "conceded"
    reason: str
    steps: Annotated[list[StepReport], operator.add]
    replans: Annotated[list[dict], operator.add]


def initial_state(session: Session, *inputs: Any, **named: Any) -> PlannerState:
    """The graph's input: a board with `inputs` (bound by type) and `named` ones (bound by name)."""
    return {
        "board": session.start(*inputs, **named),
        "next": None,
        "plan": [],
        "status": "",
        "reason": "",
        "steps": [],
        "replans": [],
    }


def planner_node(session: Session):
    """The node that plans from `state["board"]` and chooses the next action."""

    async def plan(state: PlannerState) -> dict[str, Any]:
        board = state["board"]
        if session.done(board):
            return {"next": None, "plan": [], "status": "success", "reason": "goal reached"}
        result = await session.next_steps(board)
        update: dict[str, Any] = {"plan": list(result.plan)}
        steps = state.get("steps")
        last = steps[-1] if steps else None
        if last is not None and last.outcome != "success":
            update["replans"] = [
                {
                    "after": last.action,
                    "reason": board.critiques[-1] if board.critiques else "",
                    "plan": list(result.plan),
                    "ms": result.elapsed_ms,
                }
            ]
        if not result.solved or not result.plan:
            return {**update, "next": None, "status": "conceded", "reason": f"no plan ({result.status.value})"}
        return {**update, "next": result.plan[0].strip("()").split()[0]}

    return plan


def action_node(session: Session, name: str):
    """The node that runs action `name` on the board."""

    async def run(state: PlannerState) -> dict[str, Any]:
        board, report = await session.execute(state["board"], name)
        return {"board": board, "steps": [report]}

    return run


def route(state: PlannerState) -> str:
    from langgraph.graph import END

    return state.get("next") or END


def planner_graph(session: Session):
    """The (uncompiled) `StateGraph`: add nodes or edges of your own, then `.compile()`."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(PlannerState)
    graph.add_node(PLANNER, planner_node(session))
    for name in session.by_name:
        graph.add_node(name, action_node(session, name))
        graph.add_edge(name, PLANNER)
    graph.add_edge(START, PLANNER)
    graph.add_conditional_edges(PLANNER, route, {**{n: n for n in session.by_name}, END: END})
    return graph


__all__ = ["PLANNER", "PlannerState", "action_node", "initial_state", "planner_graph", "planner_node", "route"]
