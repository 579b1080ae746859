"""A LangGraph graph whose planner node routes around a failing tool.

    python examples/langgraph_replan.py

The tools (`travel.py`): `find_flight` (cheap, but the airline API is down), `find_train` (dearer), `book`.
The planner node plans the cheapest route (flight), the flight tool fails, the planner node replans from the
graph's state without it, and the graph books the train.
"""

from __future__ import annotations

import asyncio

from travel import TOOLS, Booking, Trip

from portfolio.agent.adapters.langgraph import initial_state, planner_graph
from portfolio.agent.adapters.session import Session


async def main() -> dict:
    session = Session(TOOLS, goal=Booking)
    try:
        graph = planner_graph(session).compile()
        final = await graph.ainvoke(initial_state(session, Trip("Oslo", "Rome")))
    finally:
        session.close()
    for step in final["steps"]:
        print(f"step   {step.action:14} {step.outcome:8} {step.error or ''}".rstrip())
    for replan in final["replans"]:
        print(f"replan after {replan['after']}: {' '.join(replan['plan'])} ({replan['ms']:.1f} ms)")
    print(f"status {final['status']}: {final['board'].objects['booking']}")
    return final


if __name__ == "__main__":
    asyncio.run(main())
