"""What a planning call takes and returns: the request delegates see, their outcomes, and the `PlanResult`.

`PlanResult` and `Attempt` are pydantic models because they cross process and wire boundaries (CLI `--json`,
HTTP, MCP); `PlanRequest` and `DelegateOutcome` stay plain dataclasses inside the process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Protocol, Sequence

from pydantic import BaseModel, Field

from domains.model import GroundAction, Plan, State, Task


class Status(str, Enum):
    SOLVED = "solved"
    UNSOLVABLE = "unsolvable"  # proven: no plan exists; stops the cascade
    TIMEOUT = "timeout"
    ERROR = "error"


@dataclass(frozen=True)
class PlanRequest:
    """One planning call.

    `init` replaces the task's initial state (replanning); `cost_model` is a function from grounded actions to
    costs (the Planner's learned costs), for delegates that ground the task; `costs` maps grounded actions in PDDL form (`"(drive t1 a b)"`) to the cost a cost-aware delegate should use
    instead of the model's own (learned costs); `excluded` lists grounded actions no plan may use (an action that
    just failed, for this adaptation generation); `critiques` are verbal reasons from earlier failures, for
    delegates that can read them (an LLM).
    """

    task: Task
    init: State | None = None  # plan from this state instead of the task's initial state
    costs: dict[str, float] | None = None
    cost_model: Callable[[Sequence[str]], dict[str, float]] | None = field(default=None, compare=False)
    excluded: frozenset[str] = frozenset()
    critiques: tuple[str, ...] = ()

    def grounded_costs(self, grounded: Sequence[str]) -> dict[str, float] | None:
        """The costs to plan with, given the grounded actions (PDDL form) a delegate found: `costs` when set,
        else what `cost_model` says for them (learned costs, computed inside the delegate's budget)."""
        if self.costs is not None:
            return self.costs
        if self.cost_model is not None:
            return self.cost_model(grounded)
        return None

    @property
    def has_costs(self) -> bool:
        return self.costs is not None or self.cost_model is not None

    @property
    def initial_state(self) -> State:
        return self.task.problem.init if self.init is None else self.init

    def effective_task(self) -> Task:
        """The task with `init` as its initial state, PDDL text included (for delegates that need text)."""
        if self.init is None or self.init == self.task.problem.init:
            return self.task
        from domains.pddl_writer import replace_init

        return replace_init(self.task, self.init)


@dataclass
class DelegateOutcome:
    status: Status
    plan: Plan | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class Delegate(Protocol):
    """Anything that can try to solve a request before a deadline (a `time.monotonic()` value).

    A delegate must return by the deadline (give or take the time to stop what it started) and leave nothing
    running; exceptions it raises count as its failure and the cascade moves on.
    """

    name: str
    budget_s: float | None  # its own budget; None: whatever its tier has left

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome: ...

    def close(self) -> None: ...


class Attempt(BaseModel):
    delegate: str
    status: Status
    elapsed_ms: float
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class PlanResult(BaseModel):
    status: Status
    plan: list[str] = Field(default_factory=list, description='Grounded actions in PDDL form, e.g. "(pick-up a)"')
    cost: float | None = None
    delegate: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    elapsed_ms: float = 0.0
    success_probability: float | None = Field(
        default=None, description="Predicted probability that every step succeeds (with learned costs)"
    )
    source: str | None = Field(default=None, description='"classical", "llm" or "decomposition"')

    @property
    def solved(self) -> bool:
        return self.status is Status.SOLVED

    def actions(self) -> Plan:
        """The plan as `GroundAction`s."""
        return [parse_ground_action(step) for step in self.plan]


def parse_ground_action(text: str) -> GroundAction:
    """`"(pick-up a)"` or `"pick-up a"` -> GroundAction("pick-up", ("a",)); names are lower-cased as in PDDL."""
    parts = text.strip().strip("()").split()
    if not parts:
        raise ValueError(f"empty action {text!r}")
    return GroundAction(parts[0].lower(), tuple(p.lower() for p in parts[1:]))


def elapsed_ms_since(start: float) -> float:
    return round((time.monotonic() - start) * 1000.0, 3)
