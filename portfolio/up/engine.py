"""`PortfolioEngine`: the portfolio as a unified-planning engine, `OneshotPlanner(name="portfolio")`,
`AnytimePlanner(name="portfolio")` and `PlanValidator(name="portfolio")` once `portfolio.up` is imported.

**What it takes** (`supported_kind`): action-based classical problems, what UP's PDDL writer can write and
`domains.pddl` reads: flat or hierarchical types; negative, disjunctive, existential and universal conditions
and equality; conditional and universally quantified effects; action costs (whole numbers, as constants or
static fluents, some of whose values may be left undefined) or plan length as the metric. The problem goes
through `domains.up_bridge.read_up_problem` (UP's writer, then the project's parser), so one reader decides
what a problem means for every delegate. A problem outside that kind, or one the reader refuses, is answered
UNSUPPORTED_PROBLEM with the reason in the log messages: never an exception (with `name="portfolio"` UP only
warns that it "cannot establish" support, then asks the engine).

**Statuses** (`portfolio.up.results.STATUSES`): SOLVED_SATISFICING for a validated plan; SOLVED_OPTIMALLY only
when the search that found it proved it optimal under the problem's own metric (never under learned costs);
UNSOLVABLE_PROVEN from a complete method (Fast Downward's translator, an exhaustive search);
UNSOLVABLE_INCOMPLETELY when an incomplete search ran out of states; TIMEOUT, MEMOUT; INTERNAL_ERROR when every
delegate failed; UNSUPPORTED_PROBLEM as above. The plan is a `SequentialPlan` of `ActionInstance`s over the
problem's own `Action` and `Object` objects; `metrics` carry the delegate that solved it, the cost, the costs it
was planned under and every attempt of the cascade (`attempts`, JSON: delegate, status, ms, reason).

**Time**: `solve(timeout=T)` ends within T plus the time to stop what was started: reading the problem and
starting the planner (on the first call) come off T, the classical tier gets `budget_s` of what is left and the
decomposer tier the rest. Without a timeout, the tiers have `budget_s` and `decomposer_budget_s`. Delegates kill
their searches at their deadline; the warm workers (a translator, a pyperplan process) stay for the next call
and are stopped by `destroy()`, which `with OneshotPlanner(...) as planner:` calls.

**Parameters** (`OneshotPlanner(name="portfolio", params={...})`): `traces` (a trace store's path: learned
action costs from its latest model steer the plans, and every plan is recorded there; `portfolio.planner`),
`weight` (lambda of the learned costs, default 5), `objective` ("risk" or "time"), `budget_s` (the classical
tier, default 1 s), `decomposer_budget_s` (default 30 s) and `improve_budget_s` (the anytime planner's improving
search when `get_solutions` has no timeout, default 10 s).

**Anytime** (`get_solutions(problem, timeout=T)`): a result with status INTERMEDIATE for each plan strictly
cheaper than the ones before it, as soon as it is found, then a final one with the cheapest plan. Two calls of
the same warm planner (`Planner.plan`), one after the other: `quality="first"`, the cascade's first cost-aware
plan in the oneshot budgets (within T); then `quality="optimal"`, Fast Downward's anytime search (weighted A*
restarts bounded by the incumbent, down to A*) and A* with LM-cut on small tasks, in all that is left of T
(`improve_budget_s` without a timeout; Fast Downward has its share of the classical tier), stopping on a proof
of optimality or at the deadline with the cheapest plan found. "Cheaper" is under the costs the plans were made
with (`results.planned_cost`): the task's own, or the learned costs of `traces`, under which no proof counts. A
task without action costs or learned costs has nothing these searches improve: its first plan is its only one.
Every plan is one the project's validator accepted (the cascade validates each). The final status is
SOLVED_OPTIMALLY when a search proved the best plan optimal for the problem's metric, SOLVED_SATISFICING when
there is a plan, else the first call's status. Both calls run between yields: nothing searches while the
caller holds a result, and a caller that stops early leaves only the warm workers, which `destroy()` stops.
With a trace store, each call's plan is recorded, as a oneshot call records its one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from unified_planning.engines import Engine, PlanGenerationResult, ValidationResult, ValidationResultStatus
from unified_planning.engines.mixins import AnytimePlannerMixin, OneshotPlannerMixin, PlanValidatorMixin
from unified_planning.engines.mixins.anytime_planner import AnytimeGuarantee
from unified_planning.engines.results import LogLevel, LogMessage
from unified_planning.engines.results import PlanGenerationResultStatus as UpStatus
from unified_planning.model import ProblemKind
from unified_planning.plans import PlanKind, SequentialPlan

from domains.errors import TaskInputError
from domains.up_bridge import UpTask, read_up_problem
from domains.validate import validate_plan
from portfolio.engine.cascade import CLASSICAL_BUDGET_S, DECOMPOSER_BUDGET_S
from portfolio.engine.results import PlanResult
from portfolio.up.results import (
    ground_plan,
    improvable,
    metric_values,
    planned_cost,
    proved_optimal,
    up_metrics,
    up_plan,
    up_status,
)
from traces.targets import is_url

log = logging.getLogger(__name__)

NAME = "portfolio"
# Taken off a caller's timeout before the tiers share it: stopping what they started, validating the plan and
# mapping it back to UP's objects all happen after the cascade's deadline.
STOP_MARGIN_S = 0.15
# The anytime planner's improving search, when `get_solutions` has no timeout (with one: what is left of it).
IMPROVE_BUDGET_S = 10.0
# A tier's budget must be > 0: a decomposer tier with no time left gets this, and records a timeout.
MIN_TIER_S = 0.001


def _kind() -> ProblemKind:
    kind = ProblemKind(version=2)
    kind.set_problem_class("ACTION_BASED")
    for typing in ("FLAT_TYPING", "HIERARCHICAL_TYPING"):
        kind.set_typing(typing)
    for condition in (
        "NEGATIVE_CONDITIONS",
        "DISJUNCTIVE_CONDITIONS",
        "EXISTENTIAL_CONDITIONS",
        "UNIVERSAL_CONDITIONS",
        "EQUALITIES",
    ):
        kind.set_conditions_kind(condition)
    for effect in ("CONDITIONAL_EFFECTS", "FORALL_EFFECTS"):
        kind.set_effects_kind(effect)
    kind.set_quality_metrics("ACTIONS_COST")
    kind.set_quality_metrics("PLAN_LENGTH")
    kind.set_actions_cost_kind("INT_NUMBERS_IN_ACTIONS_COST")
    kind.set_actions_cost_kind("STATIC_FLUENTS_IN_ACTIONS_COST")
    # UP calls a cost real when its fluent is declared `number`, as PDDL's are: whole values are read; a
    # fractional one is refused by the reader (Fast Downward takes whole costs), an UNSUPPORTED_PROBLEM
    kind.set_actions_cost_kind("REAL_NUMBERS_IN_ACTIONS_COST")
    # cost fluents left without a value for arguments no applicable action uses (IPC's elevators, transport)
    kind.set_initial_state("UNDEFINED_INITIAL_NUMERIC")
    return kind


_SUPPORTED_KIND = _kind()


class PortfolioEngine(Engine, OneshotPlannerMixin, AnytimePlannerMixin, PlanValidatorMixin):
    """The portfolio behind UP's oneshot planner, anytime planner and plan validator interfaces (module
    docstring)."""

    def __init__(
        self,
        traces: str | Path | None = None,
        weight: float = 5.0,
        objective: str = "risk",
        budget_s: float = CLASSICAL_BUDGET_S,
        decomposer_budget_s: float = DECOMPOSER_BUDGET_S,
        improve_budget_s: float = IMPROVE_BUDGET_S,
    ) -> None:
        from learning.objective import check_objective
        from portfolio.cost_cache import check_weight

        Engine.__init__(self)
        OneshotPlannerMixin.__init__(self)
        AnytimePlannerMixin.__init__(self)
        # a PostgreSQL URL stays text: Path() would fold its "//"
        self.traces: Path | str | None = None if traces is None else traces if is_url(str(traces)) else Path(traces)
        self.weight = check_weight(weight)
        self.objective = check_objective(objective)
        budgets = (
            ("budget_s", budget_s),
            ("decomposer_budget_s", decomposer_budget_s),
            ("improve_budget_s", improve_budget_s),
        )
        for label, value in budgets:
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{label}: expected a finite number of seconds > 0, got {value!r}")
        self.budget_s, self.decomposer_budget_s = float(budget_s), float(decomposer_budget_s)
        self.improve_budget_s = float(improve_budget_s)
        self._planner: Any = None  # `portfolio.planner.Planner`, started by the first solve
        self._lock = threading.Lock()  # one solve at a time: the tiers' budgets are set per call

    @property
    def name(self) -> str:
        return NAME

    @staticmethod
    def supported_kind() -> ProblemKind:
        return _SUPPORTED_KIND

    @staticmethod
    def supports(problem_kind: ProblemKind) -> bool:
        return bool(problem_kind <= _SUPPORTED_KIND)

    @staticmethod
    def supports_plan(plan_kind: PlanKind) -> bool:
        return bool(plan_kind == PlanKind.SEQUENTIAL_PLAN)

    # -- planning ---------------------------------------------------------------------------------------------
    def _solve(
        self,
        problem: Any,
        heuristic: Callable[[Any], float | None] | None = None,
        timeout: float | None = None,
        output_stream: IO[str] | None = None,
    ) -> PlanGenerationResult:
        start = time.monotonic()
        if heuristic is not None:
            warnings.warn(f"{NAME} does not use a custom heuristic", UserWarning, stacklevel=3)
        read = self._read(problem)
        if isinstance(read, PlanGenerationResult):
            return read
        result = self._plan(read, None if timeout is None else start + timeout)
        if result is None:
            return self._answer(UpStatus.TIMEOUT, f"the timeout of {timeout} s ran out before planning began")
        return self._result(result, read, problem, output_stream)

    def _get_solutions(
        self, problem: Any, timeout: float | None = None, output_stream: IO[str] | None = None
    ) -> Iterator[PlanGenerationResult]:
        """A fast plan, then a cheaper one (module docstring, **Anytime**)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read = self._read(problem)
        if isinstance(read, PlanGenerationResult):
            yield read
            return
        best = self._plan(read, deadline, quality="first")
        if best is None:
            yield self._answer(UpStatus.TIMEOUT, f"the timeout of {timeout} s ran out before planning began")
            return
        if not best.solved:
            yield self._result(best, read, problem, output_stream)
            return
        yield self._result(best, read, problem, output_stream, UpStatus.INTERMEDIATE)
        optimal = proved_optimal(best, read.task, problem)
        better = None
        if not optimal and improvable(best, read.task):
            better = self._plan(read, deadline, quality="optimal", improving=True)
        if better is not None:
            if planned_cost(better) < planned_cost(best):
                best = better
                yield self._result(best, read, problem, output_stream, UpStatus.INTERMEDIATE)
            # a proof for a plan as cheap as the best proves the best optimal too
            optimal = planned_cost(better) == planned_cost(best) and proved_optimal(better, read.task, problem)
        status = UpStatus.SOLVED_OPTIMALLY if optimal else UpStatus.SOLVED_SATISFICING
        yield self._result(best, read, problem, None, status)

    @staticmethod
    def ensures(anytime_guarantee: AnytimeGuarantee) -> bool:
        """Each plan `get_solutions` yields is strictly cheaper than the one before (module docstring);
        they are not each optimal."""
        return bool(anytime_guarantee == AnytimeGuarantee.INCREASING_QUALITY)

    def _plan(
        self, read: UpTask, deadline: float | None, quality: str | None = None, improving: bool = False
    ) -> PlanResult | None:
        """One call of the planner on `read.task`, to end by `deadline` (`time.monotonic()`; None: no timeout),
        or None when too little time is left to start. The tiers' budgets are `_budgets`, or `_improve_budgets`
        for the anytime planner's `improving` call, of what is left once the planner has started; `quality`
        (`Planner.plan`) overrides the planner's for this call."""
        with self._lock:
            planner = self._started()
            left = None if deadline is None else deadline - time.monotonic()
            budgets = self._improve_budgets(left) if improving else self._budgets(left)
            if budgets is None:
                return None
            with _TierBudgets(planner, *budgets):
                result: PlanResult = planner.plan(read.task, quality=quality)
        return result

    def _result(
        self,
        result: PlanResult,
        read: UpTask,
        problem: Any,
        output_stream: IO[str] | None,
        status: UpStatus | None = None,
    ) -> PlanGenerationResult:
        """`result` as UP's answer (status from `up_status` unless `status` is given); one line per attempt of
        the cascade to `output_stream`."""
        if output_stream is not None:
            for attempt in result.attempts:
                output_stream.write(f"{attempt.delegate}: {attempt.status.value} in {attempt.elapsed_ms:g} ms\n")
        if status is None:
            status = up_status(result, proved_optimal(result, read.task, problem))
        plan = up_plan(result, read.items) if result.solved else None
        reasons = [f"{a.delegate}: {a.status.value}: {a.reason}" for a in result.attempts if a.reason]
        messages = [LogMessage(LogLevel.INFO, reason) for reason in reasons]
        return PlanGenerationResult(status, plan, NAME, up_metrics(result), messages)

    def _read(self, problem: Any) -> UpTask | PlanGenerationResult:
        """The problem as a task with its names, or the UNSUPPORTED_PROBLEM answer saying why not."""
        kind = getattr(problem, "kind", None)
        if not isinstance(kind, ProblemKind) or not self.supports(kind):
            outside = sorted(set(kind.features) - set(_SUPPORTED_KIND.features)) if kind is not None else []
            why = ", ".join(outside) if outside else f"a {type(problem).__name__}"
            return self._answer(UpStatus.UNSUPPORTED_PROBLEM, f"{NAME} does not support {why}")
        try:
            return read_up_problem(problem)
        except TaskInputError as error:
            return self._answer(UpStatus.UNSUPPORTED_PROBLEM, str(error))

    def _answer(self, status: UpStatus, message: str) -> PlanGenerationResult:
        return PlanGenerationResult(status, None, NAME, {}, [LogMessage(LogLevel.INFO, message)])

    def _started(self) -> Any:
        """The planner, made on the first solve (a validator never starts one)."""
        if self._planner is None:
            from portfolio.delegates.registry import DEFAULT_DELEGATES, build_stages
            from portfolio.planner import Planner

            stages = build_stages(DEFAULT_DELEGATES, self.budget_s, decomposer_budget_s=self.decomposer_budget_s)
            self._planner = Planner(stages, traces=self.traces, cost_weight=self.weight, objective=self.objective)
        return self._planner

    def _budgets(self, left: float | None) -> tuple[float, float] | None:
        """(classical, decomposer) budgets for a call with `left` seconds (None: no timeout), or None when too
        little is left to start."""
        if left is None:
            return self.budget_s, self.decomposer_budget_s
        left -= STOP_MARGIN_S
        if left < 10 * MIN_TIER_S:
            return None
        classical = min(self.budget_s, left)
        return classical, max(MIN_TIER_S, min(self.decomposer_budget_s, left - classical))

    def _improve_budgets(self, left: float | None) -> tuple[float, float] | None:
        """(classical, decomposer) budgets of the anytime planner's improving call with `left` seconds (None: no
        timeout, `improve_budget_s`), or None when too little is left. The decomposer tier gets the least it can:
        a plan it assembles from subgoals is no cheaper one."""
        if left is None:
            return self.improve_budget_s, MIN_TIER_S
        left -= STOP_MARGIN_S
        if left < 10 * MIN_TIER_S:
            return None
        return left, MIN_TIER_S

    # -- validation -------------------------------------------------------------------------------------------
    def _validate(self, problem: Any, plan: Any) -> ValidationResult:
        """The project's validator (`domains.validate`) on the problem read as a task; with a valid plan, the
        value of the problem's cost or length metric (`metric_evaluations`). UNKNOWN when the problem cannot be
        read, the plan is not sequential, or it names an action or object the problem does not have."""
        read = self._read(problem)
        if isinstance(read, PlanGenerationResult):
            return ValidationResult(ValidationResultStatus.UNKNOWN, NAME, read.log_messages)
        if not isinstance(plan, SequentialPlan):
            message = f"{NAME} validates sequential plans, not a {type(plan).__name__}"
            return ValidationResult(ValidationResultStatus.UNKNOWN, NAME, [LogMessage(LogLevel.INFO, message)])
        names = {item: name for name, item in read.items.items()}
        try:
            steps = ground_plan(plan, names)
        except KeyError as error:
            message = f"the plan names {error.args[0]}, which the problem does not have"
            return ValidationResult(ValidationResultStatus.UNKNOWN, NAME, [LogMessage(LogLevel.INFO, message)])
        verdict = validate_plan(read.task, steps)
        if not verdict.ok:
            message = verdict.message or verdict.problem
            return ValidationResult(ValidationResultStatus.INVALID, NAME, [LogMessage(LogLevel.INFO, message)])
        return ValidationResult(
            ValidationResultStatus.VALID, NAME, [], metric_values(problem, verdict.cost, len(steps))
        )

    def destroy(self) -> None:
        """Stop the planner's workers (`with OneshotPlanner(...)` calls this at the end of the block)."""
        if self._planner is not None:
            self._planner.close()
            self._planner = None


class _TierBudgets:
    """Set the cascade's tier budgets for one call and restore them after (as the service's workers do)."""

    def __init__(self, planner: Any, classical: float, decomposer: float) -> None:
        from portfolio.engine.tiers import Tier

        wanted = {"classical": classical, "decomposer": decomposer}
        self._tiers = [s for s in planner.cascade.delegates if isinstance(s, Tier) and s.name in wanted]
        self._saved = [t.budget_s for t in self._tiers]
        self._wanted = [wanted[t.name] for t in self._tiers]

    def __enter__(self) -> None:
        for tier, budget in zip(self._tiers, self._wanted, strict=True):
            tier.budget_s = budget

    def __exit__(self, *exc: object) -> None:
        for tier, budget in zip(self._tiers, self._saved, strict=True):
            tier.budget_s = budget
