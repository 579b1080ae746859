"""What the execute-observe-replan loop (`portfolio.agent.loop`) takes and what it reports.

In: `LoopConfig` (the replan trigger and the limits that make the loop concede), the `Executor` that runs
grounded actions and reports an `Observation`, an optional `Reflection` (LLM critics around a step) and a
`VetoCheck`. Out: a `RunResult` with one `StepResult` per executed step (retries included) and one `Replan` per
new plan: what the trace store and the events are written from. `divergence` is the progress measure that the
`progress` trigger and every step record use: the share of a step's expected effects that were not observed.

Plain data and protocols, apart from the loop's machinery (`portfolio.agent.loop_run`, the drivers in
`portfolio.agent.loop`), so that runtimes and adapters can name them; `portfolio.agent.loop` re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from domains.model import GroundAction, State

TRIGGERS = ("every-step", "on-failure", "progress")
VetoCheck = Callable[[GroundAction, State], "bool | str | None"]


@dataclass
class LoopConfig:
    """When to replan and when to give up. `loop_limit`: executions of one action in one state before it is
    a loop; `backoff_s`: first retry delay of a transient failure (doubling)."""

    trigger: str = "on-failure"
    window: int = 5
    threshold: float = 0.3
    max_steps: int = 100
    max_replans: int = 30
    max_adaptations: int = 5
    max_seconds: float = 60.0
    max_retries: int = 2
    backoff_s: float = 0.05
    loop_limit: int = 2

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, got {self.trigger!r}")
        if self.window < 1 or not 0.0 <= self.threshold <= 1.0:
            raise ValueError("window must be >= 1 and threshold within [0, 1]")


@dataclass
class Observation:
    """What a handler reports: the state after the action, its return value, and a replan request from a
    `replan_when` predicate (its reason), if any."""

    state: State
    output: Any = None
    replan_reason: str | None = None


class Executor(Protocol):
    """Runs grounded actions for the loop (the agent provides one per run)."""

    def hint(self, action: GroundAction) -> str: ...

    def side_effects(self, action: GroundAction) -> bool: ...

    def execute(self, action: GroundAction, state: State, expected: State) -> Observation: ...

    def apply_updates(self, state: State, updates: Any) -> State: ...


class Reflection(Protocol):
    """Critics around a step (see `portfolio.agent.reflection.LLMReflection`). `before` returns a reason to veto
    a side-effecting step (None: go ahead); `after` returns a reason to declare an executed step failed."""

    def before(self, step: str, state: list[str], plan: list[str]) -> str | None: ...

    def after(self, step: str, expected: list[str], observed: list[str], output: Any) -> str | None: ...


@dataclass
class StepResult:
    step: int
    action: str
    outcome: str  # "success" | "failure" | "replan"
    ms: float
    error: str | None = None
    category: str | None = None
    decision: str | None = None
    generation: int = 0
    divergence: float = 0.0
    critique: str | None = None


@dataclass
class Replan:
    trigger: str  # every-step, failure, progress, hint, requested, veto, plan-invalid, loop
    reason: str
    generation: int  # the generation this replan starts
    after_step: int | None
    ms: float
    plan: list[str] = field(default_factory=list)
    status: str = ""


@dataclass
class RunResult:
    status: str  # "success" | "conceded"
    reason: str
    state: State
    output: Any = None
    steps: list[StepResult] = field(default_factory=list)
    replans: list[Replan] = field(default_factory=list)
    plans: list[list[str]] = field(default_factory=list)
    critiques: list[str] = field(default_factory=list)
    run_id: str | None = None
    elapsed_ms: float = 0.0

    @property
    def succeeded(self) -> bool:
        return self.status == "success"


def effect_literals(before: State, after: State) -> list[str]:
    """The changes from `before` to `after` as PDDL literals: additions, then `(not ...)` for deletions."""
    return [str(a) for a in sorted(after - before)] + [f"(not {a})" for a in sorted(before - after)]


def divergence(before: State, expected: State, observed: State) -> tuple[float, list[str], list[str]]:
    """(share of expected effects not observed, expected literals, observed literals)."""
    adds, deletes = expected - before, before - expected
    wanted = len(adds) + len(deletes)
    seen = sum(1 for a in adds if a in observed) + sum(1 for a in deletes if a not in observed)
    return (
        (0.0 if wanted == 0 else 1.0 - seen / wanted),
        effect_literals(before, expected),
        effect_literals(before, observed),
    )


__all__ = [
    "TRIGGERS",
    "Executor",
    "LoopConfig",
    "Observation",
    "Reflection",
    "Replan",
    "RunResult",
    "StepResult",
    "VetoCheck",
    "divergence",
    "effect_literals",
]
