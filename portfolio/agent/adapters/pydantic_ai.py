"""pydantic-ai adapter: the planner as function tools of an LLM agent.

    tools = PlannerTools(Session([find_flight, find_train, book], goal=Booking), Trip("Oslo", "Rome"))
    agent = pydantic_ai.Agent(model, tools=tools.tools())
    await agent.run("Book me a trip")

Two tools: `plan` (the remaining steps to the goal from what is known now, avoiding steps that failed: a
validated plan from the shared `Planner`) and `execute_step` (run one step; its outcome comes back, and a failed
step is excluded so the next `plan` routes around it). The model decides when to plan and what to run; the
planner keeps it honest (only valid plans, only known actions). One `PlannerTools` holds one run's board: make
one per run. pydantic-ai is imported only by `tools()`.
"""

from __future__ import annotations

from typing import Any

from portfolio.agent.adapters.session import Session, StepReport


class PlannerTools:
    """One run's board and the two tools over it (module docstring)."""

    def __init__(self, session: Session, *inputs: Any, **named: Any) -> None:
        self.session = session
        self.board = session.start(*inputs, **named)
        self.reports: list[StepReport] = []
        self.plans: list[list[str]] = []

    async def plan(self) -> dict[str, Any]:
        """Plan the remaining steps to the goal from what is known now, avoiding steps that failed.
        Returns `done` (the goal is reached), `status`, the `steps` in order and the `failed` steps so far."""
        failed = list(self.board.excluded)
        if self.session.done(self.board):
            return {"done": True, "status": "solved", "steps": [], "failed": failed}
        result = await self.session.next_steps(self.board)
        self.plans.append(list(result.plan))
        return {"done": False, "status": result.status.value, "steps": list(result.plan), "failed": failed}

    async def execute_step(self, action: str) -> dict[str, Any]:
        """Run one step of the plan, e.g. "(find-train)". Returns its outcome and error; after a failure, call
        `plan` again for a route around it."""
        self.board, report = await self.session.execute(self.board, action)
        self.reports.append(report)
        return {"action": report.action, "outcome": report.outcome, "error": report.error}

    def output(self, key: str) -> Any:
        """An object on the board by type key (e.g. "booking") or binding name."""
        return self.board.named.get(key, self.board.objects.get(key))

    def tools(self) -> list:
        from pydantic_ai import Tool

        return [
            Tool(self.plan, takes_ctx=False, name="plan"),
            Tool(self.execute_step, takes_ctx=False, name="execute_step"),
        ]


__all__ = ["PlannerTools"]
