"""A pydantic-ai agent that uses the planner as a function tool and replans around a failing tool.

    python examples/pydantic_ai_replan.py

No network: the model is pydantic-ai's own `FunctionModel` with a scripted policy standing in for an LLM
(plan, run the first step, plan again after every step, answer when the goal is reached). Swap in any real
model (`pydantic_ai.Agent("openai:gpt-4o", ...)`): the tools stay the same.
"""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from travel import TOOLS, Booking, Trip

from portfolio.agent.adapters.pydantic_ai import PlannerTools
from portfolio.agent.adapters.session import Session


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """What a tool-using LLM does here: plan, execute the plan's first step, plan again, stop when done."""
    returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if not returned:
        return ModelResponse(parts=[ToolCallPart("plan", {})])
    last = returned[-1]
    if last.tool_name == "plan":
        if last.content["done"]:
            return ModelResponse(parts=[TextPart("Booked.")])
        if not last.content["steps"]:
            return ModelResponse(parts=[TextPart(f"No way to book: {last.content['status']}.")])
        return ModelResponse(parts=[ToolCallPart("execute_step", {"action": last.content["steps"][0]})])
    return ModelResponse(parts=[ToolCallPart("plan", {})])


async def main() -> PlannerTools:
    session = Session(TOOLS, goal=Booking)
    try:
        tools = PlannerTools(session, Trip("Oslo", "Rome"))
        agent = Agent(FunctionModel(scripted_model), tools=tools.tools())
        answer = await agent.run("Book me a trip from Oslo to Rome.")
    finally:
        session.close()
    for plan in tools.plans:
        print(f"plan   {' '.join(plan)}")
    for report in tools.reports:
        print(f"step   {report.action:14} {report.outcome:8} {report.error or ''}".rstrip())
    print(f"answer {answer.output!r}: {tools.output('booking')}")
    return tools


if __name__ == "__main__":
    asyncio.run(main())
