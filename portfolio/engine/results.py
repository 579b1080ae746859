"""What a planning call takes and returns: the request delegates see, their outcomes, and the `PlanResult`.

`PlanResult` and `Attempt` cross process and wire boundaries (CLI `--json`, HTTP, MCP): dataclasses with pydantic's
model methods (`WireModel`: `model_dump`, `model_validate`, ..., pydantic imported on first use, so a plain
`portfolio plan` loads none of it); `PlanRequest` and `DelegateOutcome` stay plain dataclasses inside the process.

Outcomes follow unified-planning's taxonomy (`PlanGenerationResultStatus`), because "no plan" means different
things: only `unsolvable` is a proof (from a complete method: Fast Downward's translator or a search that
reports exit code 11, an exhaustive search) and stops the cascade; `incomplete` is an incomplete method that
ran out of search space (pyperplan's greedy search with helpful-action pruning, FD's exit code 12), which says
nothing about the task. `unsupported` is a delegate declining a task it cannot read (`Delegate.supports`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Protocol, Self

from domains.ground_text import ground_action_text, normalise_actions, normalise_keys, parse_ground_action
from domains.model import GroundAction, Plan, State, Task
from portfolio.engine.wire_model import WireModel
from traces.attempt_details import AttemptDetails

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema


class Status(str, Enum):
    """How an attempt (or a whole planning call) ended."""

    SOLVED = "solved"  # a plan, checked by the validator
    UNSOLVABLE = "unsolvable"  # proven by a complete method: no plan exists; stops the cascade
    INCOMPLETE = "incomplete"  # an incomplete method exhausted its search space: no verdict
    UNSUPPORTED = "unsupported"  # the delegate declined the task (features it cannot handle)
    MEMOUT = "memout"  # out of memory, or a node limit
    TIMEOUT = "timeout"  # the budget ran out
    ERROR = "error"  # a crash, an invalid plan, an endpoint failure


# Which status a planning call without a plan reports, from its attempts: the first of these any attempt had.
# More time would have helped (timeout, memout) before "searched and found nothing" (incomplete) before
# failures; `unsupported` only when every delegate declined.
NO_PLAN_ORDER = (Status.TIMEOUT, Status.MEMOUT, Status.INCOMPLETE, Status.ERROR, Status.UNSUPPORTED)


def no_plan_status(statuses: Sequence[Status]) -> Status:
    """The status of a call whose attempts all ended without a plan or proof (`NO_PLAN_ORDER`)."""
    present = set(statuses)
    return next((status for status in NO_PLAN_ORDER if status in present), Status.ERROR)


class Selection(Protocol):
    """A learned configuration selection (`learning.selection.SelectionModel`), as a delegate that races
    configurations asks it: which to race on a task of `domain` with `operators` operators translated with the
    `translator` flags (None: the delegate's fixed order), and which translator flags a task of `domain` gets
    when `race_size` searches race (() for the defaults)."""

    def predict(
        self, domain: str, operators: int | None = ..., translator: Sequence[str] = ...
    ) -> list[str] | None: ...

    def predict_translator(self, domain: str, race_size: int = ...) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class PlanRequest:
    """One planning call.

    `init` replaces the task's initial state (replanning); `cost_function` is a function from grounded actions to
    costs (the Planner's learned costs; `PlanResult.cost_model` names the model they came from), for delegates
    that ground the task; `costs` maps grounded actions in PDDL form (`"(drive t1 a b)"`) to the cost a cost-aware
    delegate should use
    instead of the model's own (learned costs); `excluded` lists grounded actions no plan may use (an action that
    just failed, for this adaptation generation); `critiques` are verbal reasons from earlier failures, for
    delegates that can read them (an LLM); `carried_over` names delegates whose work on this very request goes
    on in the background (`portfolio.engine.cascade`, "Carry-over"), so a delegate need not repeat it; `answer_by` (a
    monotonic time, set on carried-over work) is when the caller wanted its first answer: after it, a delegate
    returns its first plan rather than wait for a cheaper one. `quality` ("first", "anytime", "optimal"; None:
    the delegate's own) says how a cost-aware delegate trades plan cost for time on this call
    (`portfolio.delegates.fast_downward.searches.QUALITIES`). `selection` (the Planner's learned selection
    model, with a trace store; None: fixed orders) chooses Fast Downward's translator flags and the searches it
    races on this call (`portfolio.delegates.fast_downward.search_plan`).
    """

    task: Task
    init: State | None = None  # plan from this state instead of the task's initial state
    costs: dict[str, float] | None = None
    cost_function: Callable[[Sequence[str]], dict[str, float]] | None = field(default=None, compare=False)
    excluded: frozenset[str] = frozenset()
    critiques: tuple[str, ...] = ()
    carried_over: frozenset[str] = frozenset()
    answer_by: float | None = None
    quality: str | None = None
    selection: Selection | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # One spelling per action ("pick-up a", "(PICK-UP a)" -> "(pick-up a)"), so every comparison of
        # excluded actions and cost keys with a delegate's grounded names is exact.
        object.__setattr__(self, "excluded", normalise_actions(self.excluded))
        if self.costs is not None:
            object.__setattr__(self, "costs", normalise_keys(self.costs))

    def is_excluded(self, action: GroundAction | str) -> bool:
        return bool(self.excluded) and ground_action_text(action) in self.excluded

    def grounded_costs(self, grounded: Sequence[str]) -> dict[str, float] | None:
        """The costs to plan with, given the grounded actions (PDDL form) a delegate found: `costs` when set,
        else what `cost_function` says for them (learned costs, computed inside the delegate's budget)."""
        if self.costs is not None:
            return self.costs
        if self.cost_function is not None:
            return self.cost_function(grounded)
        return None

    @property
    def has_costs(self) -> bool:
        return self.costs is not None or self.cost_function is not None

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
    details: AttemptDetails = field(default_factory=AttemptDetails)
    # Who answered, when not the delegate itself: the name its attempt and the result record (Fast Downward's
    # in-process searches answer as "fd-inprocess"). None: the delegate's own name.
    delegate: str | None = None


class Resource:
    """Mixin for objects that own processes, threads or directories: `with X() as x:` closes them."""

    def close(self) -> None:  # pragma: no cover - overridden
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Delegate(Resource):
    """The base class of everything the cascade can try: solve a request before a deadline (a
    `time.monotonic()` value).

    A delegate must return by the deadline (give or take the time to stop what it started) and leave nothing
    running; exceptions it raises count as its failure and the cascade moves on. Subclasses set `name` and
    implement `solve`; every other member has the default the cascade assumes of a delegate that says nothing:
    - `supports(task)` is asked first and must be cheap (no grounding, no search): False records `unsupported`
      (with `decline_reason(task)`) and moves on;
    - `share`: its weight when its tier's budget is split (`portfolio.engine.cascade`), unless the tier says;
    - `carries_over`: whether the cascade may let its work go on past its share (`portfolio.engine.carry`);
    - `source`: what kind of plan it makes (`PlanResult.source`: "classical", "llm" or "decomposition");
    - `budget_s`: a budget of its own (None: its share of its tier);
    - `warm_up` starts workers ahead of the first call; `close` stops everything it started (delegates are
      context managers).
    """

    name: str = "delegate"
    budget_s: float | None = None
    source: str = "classical"
    share: float = 1.0
    carries_over: bool = False

    def supports(self, task: Task) -> bool:
        return True

    def decline_reason(self, task: Task) -> str:
        return ""

    def warm_up(self) -> None:
        return None

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        raise NotImplementedError(f"{type(self).__name__} must implement solve(request, deadline)")


STATUS_HELP = (
    "solved; unsolvable (proved by a complete method: the only status that stops the cascade); "
    "incomplete (an incomplete search ran out of states: no verdict); unsupported (declined the task); "
    "memout; timeout; error"
)


class _AsStored:
    """Pydantic's view of `Attempt.details`: the plain JSON object it is in the trace store and on the wire, so
    it is validated, serialised and described in the API schema as an object of any keys, none dropped and no
    value coerced; type checkers see `AttemptDetails`."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return handler.generate_schema(dict[str, Any])


@dataclass
class Attempt(WireModel):
    """One delegate's try, in the order things happened. Fast Downward's work carried over past its share
    (`portfolio.engine.cascade`, "Carry-over") has two: `timeout` with `details.carried_over` at the end of its share,
    then one with `details.background` saying how the work ended (`details.stopped_by` when another delegate
    answered first); a delegate cut short by a carried-over plan is `timeout` with `details.stopped_by`."""

    delegate: str
    status: Status = field(metadata={"description": STATUS_HELP})
    elapsed_ms: float
    reason: str = ""
    details: Annotated[AttemptDetails, _AsStored] = field(default_factory=AttemptDetails)

    def __post_init__(self) -> None:
        """`status` may be given as its value ("solved"); `details` is kept as a copy of the dict given, so the
        delegate's own dict can change after without changing the record."""
        self.status = Status(self.status)
        self.details = self.details.copy()


@dataclass
class PlanResult(WireModel):
    """What a planning call returns: how it ended, the plan (validated) when there is one, and every attempt."""

    # descriptions in each field's metadata, where pydantic reads them for the JSON Schema (a subclass's too)
    status: Status = field(
        metadata={
            "description": "The call's outcome: " + STATUS_HELP + ". Without a plan or proof: the first of "
            "timeout, memout, incomplete, error, unsupported among the attempts"
        }
    )
    plan: list[str] = field(
        default_factory=list, metadata={"description": 'Grounded actions in PDDL form, e.g. "(pick-up a)"'}
    )
    cost: float | None = None
    delegate: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    elapsed_ms: float = 0.0
    success_probability: float | None = field(
        default=None, metadata={"description": "Predicted probability that every step succeeds (with learned costs)"}
    )
    learned_cost: float | None = field(
        default=None,
        metadata={
            "description": "The plan's cost under the learned costs it was planned with (base cost plus weight * "
            "-log(1 - p_fail) per step; objective time: expected seconds to the goal); `cost` is its base cost"
        },
    )
    source: str | None = field(default=None, metadata={"description": '"classical", "llm" or "decomposition"'})
    cost_model: str | None = field(
        default=None,
        metadata={
            "description": 'The costs the plan was made under: "task" (the task\'s own) or "learned:<generation>"; '
            "a replan reuses a plan only under the same one"
        },
    )
    explanation: list[str] = field(
        default_factory=list,
        metadata={
            "description": "Status unsolvable: each goal atom no plan can reach and why, traced back to a fact no "
            "action adds and the initial state lacks (`domains.explain`); empty when every goal atom is reachable "
            "in the delete relaxation or the task is too large to tell"
        },
    )
    eliminated_steps: int = field(
        default=0,
        metadata={
            "description": "Steps of the delegate's plan that no goal needed, removed after validation (greedy "
            "action elimination); `plan` is what is left"
        },
    )

    def __post_init__(self) -> None:
        """`status` may be given as its value ("solved")."""
        self.status = Status(self.status)
        # The learned costs the plan was made with (grounded action in PDDL form -> `learning.costs.ActionCost`),
        # set by `Planner.plan` for `Planner.explain`: a Thompson draw cannot be made again, and the model may have
        # been reloaded since. Not a field: never serialised; None without learned costs and for a result read back.
        self._planned_costs: dict[str, Any] | None = None

    @property
    def solved(self) -> bool:
        return self.status is Status.SOLVED

    def actions(self) -> Plan:
        """The plan as `GroundAction`s."""
        return [parse_ground_action(step) for step in self.plan]


def elapsed_ms_since(start: float) -> float:
    return round((time.monotonic() - start) * 1000.0, 3)
