"""A pool of warm planner worker processes (`portfolio.serve.worker`), shared by every request.

Why processes: a planning call is CPU-bound Python (parsing, validation, the translator, pyperplan) plus child
processes; one planner behind one lock made a small request wait 7.9 s behind a decomposer call that took 8 s.
Here each worker owns a warm `Planner`, a request takes whichever worker is free, and a request that finds none
waits in a bounded FIFO queue: when `queue_limit` requests already wait, it is refused at once (`QueueFull`,
answered 503 with Retry-After) rather than left to wait without limit. A small request is therefore never held
up by a large one while another worker is free.

Each worker is a `portfolio.engine.workers.WorkerProcess` (the same killable channel the delegates use) running a
different program: a call that outlives its deadline kills the worker's process group and starts a fresh one,
and a worker that dies (out of memory, killed) is replaced and its request fails with the reason. The
worker's own children go down with it (its Python workers watch it, its searches get the kernel's parent-death
signal: `portfolio.engine.limits`).

All bookkeeping (idle list, waiters) happens on the event loop's thread; the blocking call runs on a thread of
a dedicated executor with one thread per worker, so the loop never blocks.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from portfolio.engine import limits
from portfolio.engine.workers import BudgetExpired, WorkerCrashed, WorkerError, WorkerProcess, kill_group

log = logging.getLogger(__name__)


# How long a (re)started worker may take to answer its first ping (interpreter, imports, the planner's warm-up).
START_TIMEOUT_S = 120.0


class QueueFull(Exception):
    """Every worker is busy and `queue_limit` requests already wait."""


class PlannerFailed(Exception):
    """The worker died, hung or raised: answered 500 with this reason."""


class CallTimedOut(PlannerFailed):
    """The worker did not answer within the call's deadline; it was killed and replaced."""


class CallOutOfMemory(PlannerFailed):
    """The call went over the worker's memory cap; the worker was replaced."""


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class PoolWorker(WorkerProcess):
    """A `WorkerProcess` running `module` (default `portfolio.serve.worker`) with the pool's configuration."""

    module = "portfolio.serve.worker"

    def __init__(self, config: BaseModel, index: int) -> None:
        self.config_json = config.model_dump_json()
        self.secrets_kept = self.secrets_needed(config)
        self.index = index
        self.closing = False
        self.ready = False  # has answered a call since it was (re)started
        super().__init__()

    def spawn(self) -> None:
        self.ready = False
        if self.closing:
            self._process = None
            raise WorkerCrashed("the server is shutting down")
        self._process = subprocess.Popen(
            [sys.executable, "-m", self.module, self.config_json],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            bufsize=0,
            # it caps itself (`limits.apply_to_self`) and runs threads; no secret but those it needs
            env=limits.capped_env(keep=self.secrets_kept),
        )

    @staticmethod
    def secrets_needed(config: BaseModel) -> tuple[str, ...]:
        """The secret variables (`portfolio.engine.child_env`) a worker with `config` is started with: the LLM API
        key where it runs the LLM delegate (`llm_url`), which reads it from its environment; else none."""
        from portfolio.delegates.llm_client import API_KEY_ENV

        return (API_KEY_ENV,) if getattr(config, "llm_url", None) else ()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def ask_to_stop(self) -> None:
        """End the worker's input: an idle worker closes its planner (stopping its planner processes) and
        exits. Does not wait, and starts no replacement from now on."""
        self.closing = True
        process = self._process
        if process is not None and process.stdin:
            try:
                process.stdin.close()
            except OSError:
                pass

    def finish_stop(self, deadline: float) -> None:
        """Wait for the worker to exit until `deadline` (a monotonic time), then kill its process group. A call
        in flight then fails with WorkerCrashed."""
        process = self._process
        if process is None:
            return
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        kill_group(process)


class PlannerPool:
    """`size` planner workers, `queue_limit` waiting requests at most. `on_restart(reason)` is called when a
    worker is replaced (for the metrics). `worker_class` is the kind of worker (the validator pool's is
    `portfolio.serve.validator.ValidatorWorker`)."""

    def __init__(
        self,
        config: BaseModel,
        size: int,
        queue_limit: int,
        on_restart: Callable[[str], None] = lambda reason: None,
        worker_class: type[PoolWorker] = PoolWorker,
        name: str = "planner",
    ) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        if queue_limit < 0:
            raise ValueError("the queue limit cannot be negative")
        self.config = config
        self.size = size
        self.queue_limit = queue_limit
        self.on_restart = on_restart
        self.name = name
        self.workers = [worker_class(config, i) for i in range(size)]
        self._idle: list[PoolWorker] = list(self.workers)
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"{name}-call")
        self.closed = False
        self.last_failure: str | None = None  # why a worker was last replaced (for /v1/health)

    @property
    def busy(self) -> int:
        return self.size - len(self._idle)

    @property
    def queued(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    async def call(self, op: str, timeout_s: float, prefer: int | None = None, **kwargs: Any) -> Any:
        """Run `op` on a free worker (worker `prefer` if it is free: its translation cache knows the task).
        Raises QueueFull, PlannerFailed, or returns what the worker answered."""
        worker = await self._acquire(prefer)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._blocking_call, worker, op, timeout_s, kwargs)
        # The worker goes back to the pool when the call is over, not when the request is cancelled (a client
        # that hangs up must not hand a busy worker to the next request).
        future.add_done_callback(lambda done: self._finished(worker, done))
        value = await asyncio.shield(future)
        return worker.index, value

    def _finished(self, worker: PoolWorker, done: asyncio.Future) -> None:
        if not done.cancelled() and done.exception() is None:
            worker.ready = True
        self._release(worker)

    async def warm_up(self) -> list[Any]:
        """Ping every worker once, so `ready` counts the workers whose planner has started (a request that
        comes first just waits for its worker in the same way). Returns what each answered (None: failed)."""

        async def ping(worker: PoolWorker) -> Any:
            try:
                return (await self.call("ping", START_TIMEOUT_S, prefer=worker.index))[1]
            except (PlannerFailed, QueueFull):
                return None

        return list(await asyncio.gather(*(ping(w) for w in self.workers)))

    @property
    def ready(self) -> int:
        return sum(1 for w in self.workers if w.ready and w.alive)

    def _blocking_call(self, worker: PoolWorker, op: str, timeout_s: float, kwargs: dict[str, Any]) -> Any:
        try:
            if not worker.ready and op != "ping":
                # A worker (re)started since its last answer is still importing: its start-up is not the
                # request's budget. Under load a replacement validator took longer than a 1 s --validate-budget
                # to start, and the trivial validation that came next was refused as too costly.
                worker.call("ping", time.monotonic() + START_TIMEOUT_S)
                worker.ready = True
            return worker.call(op, time.monotonic() + timeout_s, **kwargs)
        except BudgetExpired:
            self._restarted(worker, "timeout")
            raise CallTimedOut(
                f"{self.name} worker {worker.index} did not answer within {timeout_s:g} s; it was killed and replaced"
            ) from None
        except WorkerCrashed as error:
            if worker.closing:
                raise PlannerFailed("the server is shutting down") from None
            self._restarted(worker, "died")
            raise PlannerFailed(f"{self.name} worker {worker.index} {error}; it was replaced") from None
        except WorkerError as error:
            if limits.is_out_of_memory(str(error)):  # WorkerProcess has already replaced it
                self._restarted(worker, limits.OUT_OF_MEMORY)
                raise CallOutOfMemory(f"{self.name} worker {worker.index} failed: {error}") from None
            raise PlannerFailed(f"{self.name} worker {worker.index} failed: {error}") from None

    def _restarted(self, worker: PoolWorker, reason: str) -> None:
        log.warning("%s worker %d replaced (%s)", self.name, worker.index, reason)
        self.last_failure = f"{self.name} worker {worker.index} replaced ({reason}) at {time.strftime('%H:%M:%S')}"
        self.on_restart(reason)

    async def _acquire(self, prefer: int | None) -> PoolWorker:
        if self.closed:
            raise PlannerFailed("the server is shutting down")
        if self._idle:
            chosen = next((w for w in self._idle if w.index == prefer), self._idle[0])
            self._idle.remove(chosen)
            return chosen
        if self.queued >= self.queue_limit:
            raise QueueFull(f"all {self.size} {self.name} workers are busy and {self.queued} requests are queued")
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(waiter.result())  # handed a worker just as the request was cancelled
            raise

    def _release(self, worker: PoolWorker) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(worker)
                return
        self._idle.append(worker)

    def replace_dead_idle(self) -> int:
        """Restart idle workers that died between requests (called periodically); how many were restarted."""
        restarted = 0
        for worker in list(self._idle):
            if not worker.alive and not worker.closing:
                try:
                    worker.spawn()
                except WorkerCrashed:
                    continue
                self._restarted(worker, "died")
                restarted += 1
        return restarted

    def close(self, grace_s: float = 1.0) -> None:
        """Stop every worker (and, through them, every planner process). Bounded by about `grace_s`."""
        self.closed = True
        for worker in self.workers:  # all at once: each gets the whole grace period to close its planner
            worker.ask_to_stop()
        deadline = time.monotonic() + grace_s
        for worker in self.workers:
            worker.finish_stop(deadline)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(PlannerFailed("the server is shutting down"))
        self._executor.shutdown(wait=False, cancel_futures=True)
