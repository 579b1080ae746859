"""PortfolioDecomposition: delegates tried in order, each under a hard wall-clock budget.

A delegate that errs, times out or returns a plan the validator rejects hands over to the next one; a delegate
that proves the task unsolvable stops the cascade (nothing after it can do better). Delegates can be grouped in
a `Tier` that shares one budget: the default classical tier gives Fast Downward and pyperplan 1 s between them.
Every attempt is recorded with its status, time and reason.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence, Union

from domains.model import plan_cost
from domains.validate import goal_reached, validate_plan
from portfolio.results import (
    Attempt,
    Delegate,
    DelegateOutcome,
    PlanRequest,
    PlanResult,
    Status,
    elapsed_ms_since,
)

log = logging.getLogger(__name__)

CLASSICAL_BUDGET_S = 1.0
DECOMPOSER_BUDGET_S = 30.0


@dataclass
class Tier:
    """Delegates that share one budget, tried in order within it."""

    name: str
    delegates: list[Delegate]
    budget_s: float

    def close(self) -> None:
        for delegate in self.delegates:
            delegate.close()


Stage = Union[Tier, Delegate]


@dataclass
class PortfolioDecomposition:
    """The cascade. `delegates` are tried in order; a bare delegate without its own `budget_s` gets
    `default_budget_s`."""

    delegates: Sequence[Stage]
    default_budget_s: float = CLASSICAL_BUDGET_S
    _closed: bool = field(default=False, init=False)

    def solve(self, request: PlanRequest) -> PlanResult:
        start = time.monotonic()
        attempts: list[Attempt] = []
        task = request.task
        if goal_reached(task, request.initial_state):
            return PlanResult(
                status=Status.SOLVED, plan=[], cost=0.0, delegate="initial-state",
                attempts=attempts, elapsed_ms=elapsed_ms_since(start), source="classical",
            )
        for stage in self.delegates:
            tier_deadline = time.monotonic() + self._stage_budget(stage)
            for delegate in stage.delegates if isinstance(stage, Tier) else [stage]:
                result = self._try(delegate, request, tier_deadline, attempts, start)
                if result is not None:
                    return result
        gave_up = Status.TIMEOUT if any(a.status is Status.TIMEOUT for a in attempts) else Status.ERROR
        return PlanResult(status=gave_up, attempts=attempts, elapsed_ms=elapsed_ms_since(start))

    def _stage_budget(self, stage: Stage) -> float:
        if isinstance(stage, Tier):
            return stage.budget_s
        return stage.budget_s if stage.budget_s is not None else self.default_budget_s

    def _try(
        self, delegate: Delegate, request: PlanRequest, tier_deadline: float, attempts: list[Attempt], start: float
    ) -> PlanResult | None:
        """Run one delegate; a final PlanResult when it settles the task, else None (attempt recorded)."""
        now = time.monotonic()
        if now >= tier_deadline:
            attempts.append(Attempt(delegate=delegate.name, status=Status.TIMEOUT, elapsed_ms=0.0,
                                    reason="tier budget used up before this delegate started"))
            return None
        deadline = tier_deadline
        if delegate.budget_s is not None:
            deadline = min(deadline, now + delegate.budget_s)
        try:
            outcome = delegate.solve(request, deadline)
        except Exception as error:  # noqa: BLE001 - any delegate failure moves the cascade on
            log.warning("delegate %s raised %s", delegate.name, error, exc_info=True)
            outcome = DelegateOutcome(Status.ERROR, reason=f"{type(error).__name__}: {error}")
        if outcome.status is Status.SOLVED:
            outcome = self._checked(outcome, request)
        attempt = Attempt(delegate=delegate.name, status=outcome.status, elapsed_ms=elapsed_ms_since(now),
                          reason=outcome.reason, details=outcome.details)
        attempts.append(attempt)
        log.info("delegate %s: %s in %.1f ms %s", delegate.name, outcome.status.value, attempt.elapsed_ms,
                 outcome.reason)
        if outcome.status is Status.SOLVED:
            assert outcome.plan is not None
            return PlanResult(
                status=Status.SOLVED, plan=[str(step) for step in outcome.plan],
                cost=plan_cost(request.task, outcome.plan), delegate=delegate.name, attempts=attempts,
                elapsed_ms=elapsed_ms_since(start), source=getattr(delegate, "source", "classical"),
            )
        if outcome.status is Status.UNSOLVABLE:
            return PlanResult(status=Status.UNSOLVABLE, delegate=delegate.name, attempts=attempts,
                              elapsed_ms=elapsed_ms_since(start))
        return None

    def _checked(self, outcome: DelegateOutcome, request: PlanRequest) -> DelegateOutcome:
        """A solved outcome stays solved only if its plan is valid and avoids excluded actions."""
        assert outcome.plan is not None
        banned = [str(step) for step in outcome.plan if str(step) in request.excluded]
        if banned:
            return DelegateOutcome(Status.ERROR, reason=f"plan uses excluded action {banned[0]}",
                                   details=outcome.details)
        validation = validate_plan(request.task, outcome.plan, init=request.initial_state)
        if not validation.ok:
            return DelegateOutcome(Status.ERROR, reason=f"invalid plan rejected by the validator: {validation.message}",
                                   details=outcome.details)
        return outcome

    def close(self) -> None:
        if not self._closed:
            for stage in self.delegates:
                stage.close()
            self._closed = True
