"""Stopping a delegate before its deadline: a per-thread stop signal that every blocking wait honours like the
deadline itself.

The cascade carries Fast Downward's unfinished work over into the next tier (`portfolio.engine.cascade`), so two
delegates can run at once, one on a thread of its own; whichever answers first wins and the other must stop
at once, not at its deadline. The `Delegate` protocol only knows deadlines, so stopping is not a new argument
threaded through every call: the cascade opens a `scope(signal)` on the thread that runs a delegate, and the
places where a delegate blocks read it from there:

- a worker call (`portfolio.engine.workers.WorkerProcess.call`: the translator, pyperplan) waits on its channel *and*
  the signal, and a stop is treated exactly like the deadline passing (the worker is killed and replaced);
- Fast Downward's search wait (`wait_any`) and hand-over (`search_run._feed`) watch the signal's file descriptor too;
- Python loops that check their deadline (the goal agenda's relaxed reachability, the subgoal sequence) ask
  `expired(deadline)`, which is also true once the signal is set.

An HTTP call to an LLM is not interrupted: it ends at its own timeout (bounded by the deadline), so a stopped
LLM delegate may take up to that long to return. A signal is a pipe (so `select` can wait on it) and may have a
parent: a signal opened inside another scope is also set when the outer one is.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Iterator

_local = threading.local()


class StopSignal:
    """Set once, from any thread; `fds()` become readable when it (or a parent) is set."""

    def __init__(self, parent: StopSignal | None = None) -> None:
        self.parent = parent
        self.reason = ""
        self._event = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self._lock = threading.Lock()
        self._closed = False

    def set(self, reason: str = "") -> None:
        with self._lock:
            if self._event.is_set() or self._closed:
                return
            self.reason = reason
            self._event.set()
            os.write(self._write, b"x")

    def is_set(self) -> bool:
        return self._event.is_set() or (self.parent is not None and self.parent.is_set())

    def fds(self) -> list[int]:
        """File descriptors that become readable once the signal is set (its own and its parents')."""
        own = [] if self._closed else [self._read]
        return own + (self.parent.fds() if self.parent is not None else [])

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._read)
                os.close(self._write)


def current() -> StopSignal | None:
    """The signal of the scope this thread is in, or None."""
    return getattr(_local, "signal", None)


@contextlib.contextmanager
def scope(signal: StopSignal) -> Iterator[StopSignal]:
    """Run the block with `signal` as this thread's stop signal."""
    outer = current()
    _local.signal = signal
    try:
        yield signal
    finally:
        _local.signal = outer


def stopped() -> bool:
    signal = current()
    return signal is not None and signal.is_set()


def stop_fds() -> list[int]:
    """What a `select` in this thread should watch besides its own descriptors."""
    signal = current()
    return signal.fds() if signal is not None else []


def expired(deadline: float) -> bool:
    """The deadline has passed, or this thread was told to stop."""
    return time.monotonic() >= deadline or stopped()


def sleep_until(deadline: float) -> bool:
    """Block until `deadline` or until this thread is told to stop, whichever comes first: how a delegate waits
    (a back-off, a poll) without holding up a cascade that no longer needs it. True when it was stopped."""
    remaining = deadline - time.monotonic()
    if remaining > 0 and not stopped():
        fds = stop_fds()
        if fds:
            select.select(fds, [], [], remaining)
        else:
            time.sleep(remaining)
    return stopped()
