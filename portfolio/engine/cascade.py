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

**Carry-over** (`carry_over=True`, the default; `--no-carry-over` in the CLI and the service). A share is the
deadline for a delegate's *first answer*, not for its work. A delegate that says it can be carried over (Fast
Downward: `carries_over = True`) runs on a thread of its own (`portfolio.engine.carry`) with the cascade's final
deadline (the start plus every stage's budget); the cascade waits for it only until its share ends. If it has
not answered by then, its translation and searches go on in the background while the later delegates run
(pyperplan still gets its share of the 1 s tier, then the decomposer tier its 30 s), and the first valid plan
from either side wins: a carried-over plan is validated the moment it arrives and stops the delegate running
in the foreground (`portfolio.engine.cancel`); a foreground plan stops the carried-over work. With no plan from the
tiers, the cascade waits for the carried-over work until the final deadline, so the whole call still ends by
it, and returns with nothing of either left running. Only one delegate is carried over per call (the first).
The goal agenda reuses the carried-over translation (`FastDownward.translate` waits for a translation another
thread is making instead of making a second one), and on unit-cost tasks leaves the full goal to the
carried-over search instead of starting the same race a second time (`PlanRequest.carried_over` tells it).

Attempts record this honestly, in the order things happened. The carried-over delegate gets two: at the end of
its share, `status: timeout` with `details.carried_over: true` (it had no answer by then: what a 1 s caller
saw), and when its work ends, a second one with `details.background: true`, its final status (`solved`,
`unsolvable`, `timeout` at the final deadline, `error`, ...), `elapsed_ms` measured from its start, and when
another delegate answered first, `status: timeout` with `details.stopped_by` naming the winner. A foreground
delegate cut short by a carried-over answer is recorded as `timeout` with `details.stopped_by` too.
`PlanResult.delegate` names whoever solved the task ("fast-downward" for a carried-over plan): the delegate, or
the part of it that answered when its outcome names one (`DelegateOutcome.delegate`: Fast Downward's in-process
searches answer as "fd-inprocess"); each attempt is named the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from domains.action_elimination import eliminate
from domains.model import Plan, Task, plan_cost
from domains.validate import goal_reached, validate_plan
from portfolio.engine import cancel
from portfolio.engine.carry import CarriedOver
from portfolio.engine.results import (
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
from portfolio.engine.tiers import Stage, Tier, _check_delegates, share_deadline
from traces.attempt_details import AttemptDetails

log = logging.getLogger(__name__)

CLASSICAL_BUDGET_S = 1.0
DECOMPOSER_BUDGET_S = 30.0
# Action elimination may add this share of the time the call has taken so far (at least ELIMINATION_MIN_S), and
# never passes the call's deadline; it stops with the plan reduced so far. A quarter lets it finish on the IPC plans
# measured; the floor keeps fast calls with long plans from returning a different plan under load
# (docs/decisions/action-elimination-budget.md).
ELIMINATION_SHARE = 0.25
ELIMINATION_MIN_S = 0.1


def _checked_supports(delegate: Delegate, task: Task) -> tuple[bool, str]:
    """(whether the delegate takes the task, why not: `decline_reason`, or a sentence naming it)."""
    try:
        if delegate.supports(task):
            return True, ""
        return False, delegate.decline_reason(task) or f"{delegate.name} does not support this task"
    except Exception as error:
        return False, f"supports() raised {type(error).__name__}: {error}"


@dataclass
class _Call:
    """One `solve` call's state: its attempts, its final deadline, the work carried over (if any), and the stop
    signal of the delegate running in the foreground."""

    request: PlanRequest
    start: float
    deadline: float
    attempts: list[Attempt]
    foreground: cancel.StopSignal
    carried: CarriedOver | None = None
    carried_recorded: bool = False
    answered_at: float | None = None  # when the foreground's answer (plan or proof) came


@dataclass
class PortfolioDecomposition(Resource):
    """The cascade: stages tried in order, each a `Tier` of delegates sharing one budget or a bare `Delegate`.
    The default has two tiers (`portfolio.delegates.registry.build_stages`): classical planning (Fast Downward,
    pyperplan) in 1 s, then decomposition (the goal agenda, and an LLM when configured) in 30 s; decomposition
    is one tier of the portfolio, not the whole of it. A bare delegate without its own `budget_s` gets
    `default_budget_s`. `carry_over`: let a delegate that allows it work on past its share (module docstring).
    `eliminate_steps`: drop the steps of the winning plan that no goal needs (`domains.action_elimination`)."""

    delegates: Sequence[Stage]
    default_budget_s: float = CLASSICAL_BUDGET_S
    carry_over: bool = True
    eliminate_steps: bool = True
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        _check_delegates([stage for stage in self.delegates if not isinstance(stage, Tier)], "the cascade")

    def solve(self, request: PlanRequest) -> PlanResult:
        start = time.monotonic()
        attempts: list[Attempt] = []
        task = request.task
        if goal_reached(task, request.initial_state):
            return PlanResult(
                status=Status.SOLVED,
                plan=[],
                cost=0.0,
                delegate="initial-state",
                attempts=attempts,
                elapsed_ms=elapsed_ms_since(start),
                source="classical",
            )
        deadline = start + sum(self._stage_budget(stage) for stage in self.delegates)
        call = _Call(request, start, deadline, attempts, cancel.StopSignal(parent=cancel.current()))
        try:
            with cancel.scope(call.foreground):
                result = self._solve(call)
            return self._finish(call, result)
        finally:
            if call.carried is not None:
                call.carried.stop("the call ended")
            call.foreground.close()

    def _solve(self, call: _Call) -> PlanResult | None:
        for stage in self.delegates:
            tier = stage if isinstance(stage, Tier) else Tier(stage.name, [stage], self._stage_budget(stage))
            result = self._run_tier(tier, call)
            if result is not None or (call.carried is not None and call.carried.settled):
                return result
        if call.carried is not None:
            call.carried.wait(call.carried.deadline)  # nothing else is left to try: its answer is the last chance
        return None

    def _finish(self, call: _Call, result: PlanResult | None) -> PlanResult:
        """The call's result: `result` (a foreground answer), else the carried-over work's, else no plan; the
        carried-over work is stopped and recorded first."""
        carried = call.carried
        if carried is not None:
            if (
                result is not None
                and carried.settled
                and carried.finished is not None
                and call.answered_at is not None
                and carried.finished < call.answered_at
            ):
                result = None  # both answered; the carried-over work first
            if result is not None:
                carried.stop(f"{result.delegate} answered first")
            else:
                carried.wait(call.deadline)
                carried.stop("the cascade's deadline passed")
            self._record_carried(call, stopped_by=result.delegate if result is not None else None)
            if result is None and carried.settled:
                result = self._settled(carried.delegate, carried.outcome, call)
        if result is None:
            result = PlanResult(status=no_plan_status([a.status for a in call.attempts]), attempts=call.attempts)
        result.attempts = list(call.attempts)
        result.elapsed_ms = elapsed_ms_since(call.start)
        return result

    def _record_carried(self, call: _Call, stopped_by: str | None = None) -> None:
        """The carried-over delegate's second attempt: how its background work ended (module docstring). Once."""
        carried = call.carried
        if carried is None or call.carried_recorded:
            return
        outcome = carried.outcome
        finished = carried.finished or time.monotonic()
        details = outcome.details.copy() if outcome is not None else AttemptDetails()
        details["background"] = True
        if stopped_by is not None and carried.stopped:
            status, reason = Status.TIMEOUT, f"stopped: {stopped_by} answered first"
            details["stopped_by"] = stopped_by
        elif outcome is None:
            status, reason = Status.TIMEOUT, "still working at the cascade's deadline"
        else:
            status, reason = outcome.status, outcome.reason
        call.attempts.append(
            Attempt(
                delegate=_answered_by(carried.delegate, outcome),
                status=status,
                elapsed_ms=round((finished - carried.started) * 1000, 3),
                reason=("finished in the background: " + reason).rstrip(": "),
                details=details,
            )
        )
        call.carried_recorded = True
        log.info(
            "carried-over %s: %s after %.1f ms",
            carried.delegate.name,
            status.value,
            (finished - carried.started) * 1000,
        )

    def _stage_budget(self, stage: Stage) -> float:
        if isinstance(stage, Tier):
            return stage.budget_s
        return stage.budget_s if stage.budget_s is not None else self.default_budget_s

    def _run_tier(self, tier: Tier, call: _Call) -> PlanResult | None:
        """The tier's delegates in order, each with its share of what the tier has left."""
        attempts = call.attempts
        # Clamped to the call's deadline: time an earlier tier overran (stopping what it started) is not added.
        tier_deadline = min(time.monotonic() + tier.budget_s, call.deadline)
        declined = {
            index: why
            for index, delegate in enumerate(tier.delegates)
            for ok, why in [_checked_supports(delegate, call.request.task)]
            if not ok
        }
        for index, delegate in enumerate(tier.delegates):
            if index in declined:
                attempts.append(
                    Attempt(delegate=delegate.name, status=Status.UNSUPPORTED, elapsed_ms=0.0, reason=declined[index])
                )
                continue
            now = time.monotonic()
            if now >= tier_deadline:
                attempts.append(
                    Attempt(
                        delegate=delegate.name,
                        status=Status.TIMEOUT,
                        elapsed_ms=0.0,
                        reason="tier budget used up before this delegate started",
                    )
                )
                continue
            shares_left = sum(tier.share_of(i) for i in range(index, len(tier.delegates)) if i not in declined)
            deadline = share_deadline(now, tier_deadline, tier.share_of(index), shares_left)
            result = self._try(delegate, deadline, call)
            if result is not None or (call.carried is not None and call.carried.settled):
                return result
        return None

    def _try(self, delegate: Delegate, slice_end: float, call: _Call) -> PlanResult | None:
        """Run one delegate until its share of the tier ends; a final PlanResult when it settles the task, else
        None (attempt recorded). A delegate that can be carried over may go on working after that."""
        request = call.request
        now = time.monotonic()
        deadline = slice_end
        if delegate.budget_s is not None:
            deadline = min(deadline, now + delegate.budget_s)
        carry = self.carry_over and call.carried is None and delegate.carries_over and call.deadline > deadline
        if carry:
            work_deadline = call.deadline if delegate.budget_s is None else min(call.deadline, now + delegate.budget_s)
            job = CarriedOver(
                delegate,
                replace(request, answer_by=deadline),
                work_deadline,
                check=lambda found: self._checked(found, request),
                on_settled=lambda: call.foreground.set(f"{delegate.name} answered"),
            )
            outcome = job.wait(deadline)
            if outcome is None:
                call.carried = job
                call.request = replace(request, carried_over=request.carried_over | {delegate.name})
                call.attempts.append(
                    Attempt(
                        delegate=delegate.name,
                        status=Status.TIMEOUT,
                        elapsed_ms=elapsed_ms_since(now),
                        reason="no answer within its share; carried over: its work goes on in the background",
                        details={"carried_over": True},
                    )
                )
                log.info("delegate %s: no answer in its share, carried over", delegate.name)
                return None
            job.stop("answered")  # it answered within its share: the thread has ended
        else:
            try:
                outcome = delegate.solve(request, deadline)
            except Exception as error:
                log.warning("delegate %s raised %s", delegate.name, error, exc_info=True)
                outcome = DelegateOutcome(Status.ERROR, reason=f"{type(error).__name__}: {error}")
            if outcome.status is Status.SOLVED:
                outcome = self._checked(outcome, request)
            carried = call.carried
            if outcome.status is not Status.SOLVED and carried is not None and carried.settled:
                # Cut short by the carried-over answer: its status says why it stopped, not what it found.
                outcome = DelegateOutcome(
                    Status.TIMEOUT,
                    reason=f"stopped: {carried.delegate.name} answered first",
                    details={**outcome.details, "stopped_by": carried.delegate.name},
                )
            if outcome.status in (Status.SOLVED, Status.UNSOLVABLE):
                call.answered_at = time.monotonic()
            if carried is not None and carried.outcome is not None:
                self._record_carried(call)  # it ended while this delegate ran: its record comes first
        attempt = Attempt(
            delegate=_answered_by(delegate, outcome),
            status=outcome.status,
            elapsed_ms=elapsed_ms_since(now),
            reason=outcome.reason,
            details=outcome.details,
        )
        call.attempts.append(attempt)
        log.info(
            "delegate %s: %s in %.1f ms %s", delegate.name, outcome.status.value, attempt.elapsed_ms, outcome.reason
        )
        return self._settled(delegate, outcome, call)

    def _settled(self, delegate: Delegate, outcome: DelegateOutcome | None, call: _Call) -> PlanResult | None:
        """The final result when `outcome` settles the task (a checked plan, or a proof), else None."""
        if outcome is None:
            return None
        if outcome.status is Status.SOLVED:
            assert outcome.plan is not None
            plan = self._reduced(list(outcome.plan), call)
            return PlanResult(
                status=Status.SOLVED,
                plan=[str(step) for step in plan],
                cost=plan_cost(call.request.task, plan),
                delegate=_answered_by(delegate, outcome),
                source=delegate.source,
                eliminated_steps=len(outcome.plan) - len(plan),
            )
        if outcome.status is Status.UNSOLVABLE:
            return PlanResult(status=Status.UNSOLVABLE, delegate=_answered_by(delegate, outcome))
        return None

    def _reduced(self, plan: Plan, call: _Call) -> Plan:
        """`plan` (validated) without the steps no goal needs, within the time module constants allow; the
        original plan when elimination is off, or when (it cannot, but every plan returned is checked) the
        reduced one does not validate."""
        if not self.eliminate_steps or len(plan) < 2:
            return plan
        now = time.monotonic()
        deadline = min(call.deadline, now + max(ELIMINATION_MIN_S, ELIMINATION_SHARE * (now - call.start)))
        request = call.request
        reduced = eliminate(request.task, plan, init=request.initial_state, deadline=deadline)
        if len(reduced) == len(plan) or not validate_plan(request.task, reduced, init=request.initial_state).ok:
            return plan
        log.info("action elimination: %d of %d steps removed", len(plan) - len(reduced), len(plan))
        return reduced

    def _checked(self, outcome: DelegateOutcome, request: PlanRequest) -> DelegateOutcome:
        """A solved outcome stays solved only if its plan is valid and avoids excluded actions."""
        assert outcome.plan is not None
        banned = [str(step) for step in outcome.plan if request.is_excluded(step)]
        if banned:
            return DelegateOutcome(
                Status.ERROR, reason=f"plan uses excluded action {banned[0]}", details=outcome.details
            )
        validation = validate_plan(request.task, outcome.plan, init=request.initial_state)
        if not validation.ok:
            return DelegateOutcome(
                Status.ERROR,
                reason=f"invalid plan rejected by the validator: {validation.message}",
                details=outcome.details,
            )
        return outcome

    def close(self) -> None:
        if not self._closed:
            for stage in self.delegates:
                stage.close()
            self._closed = True


def _answered_by(delegate: Delegate, outcome: DelegateOutcome | None) -> str:
    """The name an attempt and a result give `delegate`'s `outcome`: the part of it that answered, if the
    outcome names one, else the delegate's own name."""
    return (outcome.delegate if outcome is not None else None) or delegate.name
