"""A pool of warm planner worker processes (`portfolio.serve.worker`), shared by every request.

A planning call is CPU-bound Python plus child processes, so each worker is a process with a warm `Planner`: a
request takes whichever worker is free, and a small request is never held up by a large one while another worker
is free (why processes: docs/decisions/planner-processes.md).

    pool = PlannerPool(config, size=2, queue_limit=8)
    await pool.warm_up()
    index, answer = await pool.call("plan", timeout_s=30.0, body=body)   # QueueFull, PlannerFailed

`PlannerPool.call(op, timeout_s, prefer=None, owner=None, stop_when_cancelled=False, **kwargs)` runs `op` on a
free worker and returns (the worker's index, its answer). A request that finds no free worker waits in a bounded
FIFO queue: when `queue_limit` requests already wait, it raises `QueueFull` at once (answered 503 with
Retry-After). A call that outlives its deadline kills the worker's process group and starts a fresh one, and a
worker that dies (out of memory, killed) is replaced: the call raises `PlannerFailed` (`CallTimedOut`,
`CallOutOfMemory`, `CallCancelled`) with the reason. Each worker is a `portfolio.engine.workers.WorkerProcess`
(the same killable channel the delegates use); its own children go down with it (`portfolio.engine.limits`).

Requests may name an owner (the validators' pool: the API key's principal). Each owner waits in a FIFO queue of
its own, bounded by `queue_limit`, and a free worker goes to the owner with the fewest calls running, in turn
among equals (the one served longest ago first), so one owner's backlog never holds up another's requests: it
is refused (`QueueFull`) or waits behind itself. `owner_limit` caps an owner's calls at once (the validators: one
worker fewer than the pool, so a worker is left for the others). Without owners, as for planning, the pool is
one FIFO queue.

A call made with `stop_when_cancelled` is stopped when the request awaiting it is cancelled (its client went
away): its worker is killed and replaced as at a deadline. Otherwise a cancelled request's call runs on to its
end and the worker goes back to the pool only then. All bookkeeping happens on the event loop's thread; the
blocking call runs on a dedicated executor with one thread per worker, so the loop never blocks.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from portfolio.engine import cancel, limits
from portfolio.engine.workers import BudgetExpired, WorkerCrashed, WorkerError, WorkerProcess, kill_group
from traces.targets import is_url, split_password

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


class CallCancelled(PlannerFailed):
    """The request was cancelled (its client went away) and the call stopped; the worker was replaced."""


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
        # the worker caps itself from its configuration: its out-of-memory errors report that limit, not the one
        # this process would give a child (`limits.limit_mb()`, half the machine when unset: "limit 12052 MB")
        self.memory_limit_mb = getattr(config, "memory_limit_mb", None)
        # a trace store's password goes in the worker's environment (libpq's PGPASSWORD), never in its arguments
        url, secret = split_password(str(getattr(config, "traces", None) or ""))
        self.extra_env = {} if secret is None else {"PGPASSWORD": secret}
        self.config_json = (config if secret is None else config.model_copy(update={"traces": url})).model_dump_json()
        self.secrets_kept = self.secrets_needed(config) + (("PGPASSWORD",) if is_url(url) else ())
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
            env=limits.capped_env(self.extra_env, keep=self.secrets_kept),
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
    """`size` planner workers, `queue_limit` waiting requests at most per owner (one owner, None, unless calls
    name theirs), `owner_limit` calls of one owner at once (None: `size`). `on_restart(reason)` is called when
    a worker is replaced (for the metrics). `worker_class` is the kind of worker (the validator pool's is
    `portfolio.serve.validator.ValidatorWorker`)."""

    def __init__(
        self,
        config: BaseModel,
        size: int,
        queue_limit: int,
        on_restart: Callable[[str], None] = lambda reason: None,
        worker_class: type[PoolWorker] = PoolWorker,
        name: str = "planner",
        owner_limit: int | None = None,
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
        self.owner_limit = owner_limit or size
        self.workers = [worker_class(config, i) for i in range(size)]
        self._idle: list[PoolWorker] = list(self.workers)
        # each owner's waiting requests, the owners in turn order (the one served longest ago first)
        self._waiters: collections.OrderedDict[Hashable, collections.deque[asyncio.Future]] = collections.OrderedDict()
        self._running: collections.Counter[Hashable] = collections.Counter()  # calls of each owner holding a worker
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"{name}-call")
        self.closed = False
        self.last_failure: str | None = None  # why a worker was last replaced (for /v1/health)

    @property
    def busy(self) -> int:
        return self.size - len(self._idle)

    @property
    def queued(self) -> int:
        return sum(self._queued(owner) for owner in self._waiters)

    def _queued(self, owner: Hashable) -> int:
        return sum(1 for waiter in self._waiters.get(owner, ()) if not waiter.done())

    async def call(
        self,
        op: str,
        timeout_s: float,
        prefer: int | None = None,
        owner: Hashable = None,
        stop_when_cancelled: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run `op` on a free worker (worker `prefer` if it is free: its translation cache knows the task), in
        `owner`'s turn. With `stop_when_cancelled`, cancelling the request stops the call (its worker is
        replaced). Raises QueueFull, PlannerFailed, or returns what the worker answered."""
        worker = await self._acquire(prefer, owner)
        loop = asyncio.get_running_loop()
        stop = cancel.StopSignal() if stop_when_cancelled else None
        future = loop.run_in_executor(self._executor, self._blocking_call, worker, op, timeout_s, kwargs, stop)
        # The worker goes back to the pool when the call is over, not when the request is cancelled (a client
        # that hangs up must not hand a busy worker to the next request).
        future.add_done_callback(lambda done: self._finished(worker, owner, done))
        try:
            value = await asyncio.shield(future)
        except asyncio.CancelledError:
            if stop is not None:
                stop.set("the request was cancelled")  # the call ends at once: see `_blocking_call`
            raise
        return worker.index, value

    def _finished(self, worker: PoolWorker, owner: Hashable, done: asyncio.Future) -> None:
        if not done.cancelled() and done.exception() is None:
            worker.ready = True
        if not worker.ready and worker.alive and not self.closed:
            # Replaced by this call (a deadline, a hang-up, a crash): its start-up (imports: seconds on a loaded
            # machine) begins now, not at the next request, which takes a worker that is ready if one is idle
            # (`_acquire`) and otherwise waits for this ping to end (the worker's lock) before its own.
            threading.Thread(target=self._warm, args=(worker,), name=f"{self.name}-warm", daemon=True).start()
        self._release(worker, owner)

    @staticmethod
    def _warm(worker: PoolWorker) -> None:
        try:
            worker.call("ping", time.monotonic() + START_TIMEOUT_S)
            worker.ready = True
        except Exception:  # closed meanwhile, or failed: the next call pings it again (`_blocking_call`)
            pass

    async def warm_up(self) -> list[Any]:
        """Ping every worker once, so `ready` counts the workers whose planner has started (a request that
        comes first just waits for its worker in the same way). Returns what each answered (None: failed)."""

        async def ping(worker: PoolWorker) -> Any:
            try:
                # an owner of its own: each worker's ping takes that worker at once, whatever `owner_limit` says
                return (await self.call("ping", START_TIMEOUT_S, prefer=worker.index, owner=("warm-up", worker)))[1]
            except (PlannerFailed, QueueFull):
                return None

        return list(await asyncio.gather(*(ping(w) for w in self.workers)))

    @property
    def ready(self) -> int:
        return sum(1 for w in self.workers if w.ready and w.alive)

    def _blocking_call(
        self, worker: PoolWorker, op: str, timeout_s: float, kwargs: dict[str, Any], stop: cancel.StopSignal | None
    ) -> Any:
        try:
            with cancel.scope(stop) if stop is not None else contextlib.nullcontext():
                if not worker.ready and op != "ping":
                    # A worker (re)started since its last answer is still importing: its start-up is not the
                    # request's budget. Under load a replacement validator took longer than a 1 s
                    # --validate-budget to start, and the trivial validation that came next was refused as too
                    # costly.
                    worker.call("ping", time.monotonic() + START_TIMEOUT_S)
                    worker.ready = True
                return worker.call(op, time.monotonic() + timeout_s, **kwargs)
        except BudgetExpired:
            if stop is not None and stop.is_set():  # stopped like at a deadline: the worker was replaced
                log.info("%s worker %d replaced: %s", self.name, worker.index, stop.reason)
                self.on_restart("cancelled")
                raise CallCancelled(f"{self.name} worker {worker.index}: {stop.reason}") from None
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
        finally:
            if stop is not None:
                stop.close()

    def _restarted(self, worker: PoolWorker, reason: str) -> None:
        log.warning("%s worker %d replaced (%s)", self.name, worker.index, reason)
        self.last_failure = f"{self.name} worker {worker.index} replaced ({reason}) at {time.strftime('%H:%M:%S')}"
        self.on_restart(reason)

    async def _acquire(self, prefer: int | None, owner: Hashable) -> PoolWorker:
        """A free worker for `owner`: at once when one is idle and the owner is under `owner_limit`, else in its
        turn (`_dispatch`); QueueFull when `queue_limit` of its requests already wait."""
        if self.closed:
            raise PlannerFailed("the server is shutting down")
        if self._idle and self._running[owner] < self.owner_limit:  # idle: nobody else can take it (`_dispatch`)
            preferred = next((w for w in self._idle if w.index == prefer), None)
            chosen = preferred or next((w for w in self._idle if w.ready), self._idle[0])  # one that has started
            self._idle.remove(chosen)
            self._running[owner] += 1
            return chosen
        queued = self._queued(owner)
        if queued >= self.queue_limit:
            whose = "" if owner is None else " of this caller"
            raise QueueFull(f"all {self.size} {self.name} workers are busy and {queued} requests{whose} are queued")
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(owner, collections.deque()).append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(waiter.result(), owner)  # handed a worker just as the request was cancelled
            else:
                self._forget(owner, waiter)
            raise

    def _forget(self, owner: Hashable, waiter: asyncio.Future) -> None:
        queue = self._waiters.get(owner)
        if queue is not None:
            try:
                queue.remove(waiter)
            except ValueError:
                pass
            if not queue:
                del self._waiters[owner]

    def _release(self, worker: PoolWorker, owner: Hashable) -> None:
        self._running[owner] -= 1
        if self._running[owner] <= 0:
            del self._running[owner]
        self._dispatch(worker)

    def _dispatch(self, worker: PoolWorker) -> None:
        """Hand `worker` to the next waiting request: of the owners under `owner_limit` with one waiting, the one
        with the fewest calls running, the one served longest ago among equals; it then goes to the back of
        the turn. Idle when nobody may take it."""
        while True:
            eligible = [owner for owner in self._waiters if self._running[owner] < self.owner_limit]
            if not eligible:
                self._idle.append(worker)
                return
            owner = min(eligible, key=lambda o: self._running[o])  # min keeps the first of equals: turn order
            queue = self._waiters.pop(owner)
            while queue and queue[0].done():  # cancelled while waiting
                queue.popleft()
            if not queue:
                continue
            queue.popleft().set_result(worker)
            self._running[owner] += 1
            if queue:
                self._waiters[owner] = queue  # to the back of the turn
            return

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
        for queue in self._waiters.values():
            for waiter in queue:
                if not waiter.done():
                    waiter.set_exception(PlannerFailed("the server is shutting down"))
        self._executor.shutdown(wait=False, cancel_futures=True)
