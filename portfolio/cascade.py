"""PortfolioDecomposition: delegates tried in order, each under a hard wall-clock budget.

A delegate that errs, times out, declines the task, exhausts an incomplete search or returns a plan the
validator rejects hands over to the next one; only a proof of unsolvability (`Status.UNSOLVABLE`, which
delegates report only from complete methods) stops the cascade. Every attempt is recorded with its status, time
and reason.

Delegates can be grouped in a `Tier` that shares one budget: the default classical tier gives Fast Downward and
pyperplan 1 s between them. Within a tier, time is split by shares, as Fast Downward's portfolios weight their
members: a delegate gets `remaining tier time x its share / the shares of the delegates still to run`, so a
slow first delegate cannot starve the later ones, and time a delegate leaves unused goes to the ones after it
(the last one gets all that is left). Delegates that decline the task hold no share.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence, Union

from domains.model import Task, plan_cost
from domains.validate import goal_reached, validate_plan
from portfolio.results import (
    Attempt,
    Delegate,
    DelegateOutcome,
    PlanRequest,
    PlanResult,
    Resource,
    Status,
    elapsed_ms_since,
    no_plan_status,
)

log = logging.getLogger(__name__)

CLASSICAL_BUDGET_S = 1.0
DECOMPOSER_BUDGET_S = 30.0


@dataclass
class Tier(Resource):
    """Delegates that share one budget, tried in order within it; `shares` (one weight per delegate) split the
    budget as the module docstring says. Without them each delegate gets the delegate catalog's share for its
    name (Fast Downward 4, the LLM 2), or 1."""

    name: str
    delegates: list[Delegate]
    budget_s: float
    shares: Sequence[float] | None = None

    def __post_init__(self) -> None:
        if self.shares is not None:
            if len(self.shares) != len(self.delegates):
                raise ValueError(f"tier {self.name}: {len(self.shares)} shares for {len(self.delegates)} delegates")
            if any(share <= 0 for share in self.shares):
                raise ValueError(f"tier {self.name}: shares must be positive, got {list(self.shares)}")

    def share_of(self, index: int) -> float:
        if self.shares is not None:
            return float(self.shares[index])
        from portfolio.delegates.registry import CATALOG  # the catalog builds tiers, so it imports this module

        spec = CATALOG.get(self.delegates[index].name)
        return spec.share if spec is not None else 1.0

    def close(self) -> None:
        for delegate in self.delegates:
            delegate.close()


Stage = Union[Tier, Delegate]


def share_deadline(now: float, tier_deadline: float, share: float, shares_left: float) -> float:
    """When a delegate's slice of its tier ends: the remaining time x share / shares still to run."""
    remaining = max(0.0, tier_deadline - now)
    return now + remaining * (share / shares_left if shares_left > 0 else 1.0)


def _checked_supports(delegate: Delegate, task: Task) -> tuple[bool, str]:
    """(whether the delegate takes the task, why not). Delegates without `supports` take everything; a
    `decline_reason(task)` method, when present, says why one does not."""
    try:
        check = getattr(delegate, "supports", None)
        if check is None or check(task):
            return True, ""
        explain = getattr(delegate, "decline_reason", None)
        return False, (explain(task) if explain else "") or f"{delegate.name} does not support this task"
    except Exception as error:  # noqa: BLE001 - a broken check is that delegate's failure, not the cascade's
        return False, f"supports() raised {type(error).__name__}: {error}"


@dataclass
class PortfolioDecomposition(Resource):
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
            tier = stage if isinstance(stage, Tier) else Tier(stage.name, [stage], self._stage_budget(stage))
            result = self._run_tier(tier, request, attempts, start)
            if result is not None:
                return result
        return PlanResult(status=no_plan_status([a.status for a in attempts]), attempts=attempts,
                          elapsed_ms=elapsed_ms_since(start))

    def _stage_budget(self, stage: Stage) -> float:
        if isinstance(stage, Tier):
            return stage.budget_s
        return stage.budget_s if stage.budget_s is not None else self.default_budget_s

    def _run_tier(self, tier: Tier, request: PlanRequest, attempts: list[Attempt], start: float) -> PlanResult | None:
        """The tier's delegates in order, each with its share of what the tier has left."""
        tier_deadline = time.monotonic() + tier.budget_s
        declined = {index: why for index, delegate in enumerate(tier.delegates)
                    for ok, why in [_checked_supports(delegate, request.task)] if not ok}
        for index, delegate in enumerate(tier.delegates):
            if index in declined:
                attempts.append(Attempt(delegate=delegate.name, status=Status.UNSUPPORTED, elapsed_ms=0.0,
                                        reason=declined[index]))
                continue
            now = time.monotonic()
            if now >= tier_deadline:
                attempts.append(Attempt(delegate=delegate.name, status=Status.TIMEOUT, elapsed_ms=0.0,
                                        reason="tier budget used up before this delegate started"))
                continue
            shares_left = sum(tier.share_of(i) for i in range(index, len(tier.delegates)) if i not in declined)
            deadline = share_deadline(now, tier_deadline, tier.share_of(index), shares_left)
            result = self._try(delegate, request, deadline, attempts, start)
            if result is not None:
                return result
        return None

    def _try(
        self, delegate: Delegate, request: PlanRequest, slice_end: float, attempts: list[Attempt], start: float
    ) -> PlanResult | None:
        """Run one delegate until its share of the tier ends; a final PlanResult when it settles the task, else
        None (attempt recorded)."""
        now = time.monotonic()
        deadline = slice_end
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
        banned = [str(step) for step in outcome.plan if request.is_excluded(step)]
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
