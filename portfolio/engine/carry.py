"""Work carried over past a delegate's share: a delegate's `solve` on a thread of its own, stoppable.

Used by the cascade (`portfolio.engine.cascade`, "Carry-over"): the delegate is started with the cascade's final
deadline as its deadline, the cascade waits for it only until the end of its share, and if it has not answered
by then it goes on here while the next delegates run. Its outcome is validated on its own thread as soon as it
arrives (the same check as every plan), and when it settles the task (a valid plan, or a proof) `on_settled`
is called, which stops whatever the cascade is running at that moment (`portfolio.engine.cancel`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from portfolio.engine import cancel
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 10.0  # a stopped delegate returns within milliseconds; this only guards against a bug
SETTLING = (Status.SOLVED, Status.UNSOLVABLE)


class CarriedOver:
    """`delegate.solve(request, deadline)` running on a thread; `check` turns a solved outcome into an error
    when its plan is not valid."""

    def __init__(
        self,
        delegate: Delegate,
        request: PlanRequest,
        deadline: float,
        check: Callable[[DelegateOutcome], DelegateOutcome],
        on_settled: Callable[[], None],
    ) -> None:
        self.delegate = delegate
        self.deadline = deadline
        self.started = time.monotonic()
        self.finished: float | None = None
        self.stopped = False  # told to stop before it had answered
        self.outcome: DelegateOutcome | None = None
        self.signal = cancel.StopSignal()
        self._check = check
        self._on_settled = on_settled
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(request,), name=f"carry-over-{delegate.name}", daemon=True
        )
        self._thread.start()

    def _run(self, request: PlanRequest) -> None:
        with cancel.scope(self.signal):
            try:
                outcome = self.delegate.solve(request, self.deadline)
            except Exception as error:
                log.warning("delegate %s raised %s", self.delegate.name, error, exc_info=True)
                outcome = DelegateOutcome(Status.ERROR, reason=f"{type(error).__name__}: {error}")
            if outcome.status is Status.SOLVED:
                outcome = self._check(outcome)
        self.outcome = outcome
        self.finished = time.monotonic()
        self._done.set()
        if outcome.status in SETTLING and not self.signal.is_set():
            self._on_settled()

    def wait(self, until: float) -> DelegateOutcome | None:
        """The outcome, waiting for it until `until` (a monotonic time); None if it is still working."""
        self._done.wait(max(0.0, until - time.monotonic()))
        return self.outcome if self._done.is_set() else None

    @property
    def settled(self) -> bool:
        """It has answered with a valid plan or a proof."""
        return self.outcome is not None and self.outcome.status in SETTLING

    def stop(self, reason: str) -> None:
        """Stop it (if it is still working) and wait until its thread, and so every process it started, is
        gone."""
        if not self._done.is_set():
            self.stopped = True
            self.signal.set(reason)
        self._thread.join(JOIN_TIMEOUT_S)
        if self._thread.is_alive():  # pragma: no cover - every blocking wait honours the signal
            log.warning("carried-over %s did not stop within %.0f s", self.delegate.name, JOIN_TIMEOUT_S)
        else:
            self.signal.close()
