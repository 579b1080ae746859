"""Killable workers: a warm Python worker process (the pre-started search processes: `search_pool`).

A budget is only hard if whatever runs under it can be stopped. `WorkerProcess(preload)` runs
`python -m portfolio.engine.worker_main` in its own process group, with the modules in `preload` imported at
start. `call(op, deadline, **kwargs)` runs the function `op` names ("package.module:function") with `kwargs` there
and returns its answer. It raises `BudgetExpired` when `deadline` passes first (or the thread's stop signal is set:
`portfolio.engine.cancel`), `WorkerCrashed` when the process dies or the worker was closed, `WorkerError` when `op`
raised (`OutOfMemory` for an allocation failure). A worker past its deadline is killed at once with its whole group
(`kill_group`: the group and every process below it), an answer it had half written included, and the next call
gets a fresh process, started at once, in the background: quicker than letting a CPython translator unwind (why:
`docs/decisions/worker-aborts.md`).

    worker = WorkerProcess(preload=translate.PRELOAD)  # portfolio.delegates.fast_downward.translate
    answer = worker.call(translate.TRANSLATE_OP, time.monotonic() + 1.0, domain_pddl=domain, problem_pddl=problem)
    worker.close()"""

from __future__ import annotations

import logging
import os
import pickle
import select
import signal
import subprocess
import threading
import time
from typing import Any

from portfolio.engine import cancel, limits, spares
from portfolio.engine.results import Resource
from portfolio.engine.spares import kill_own_group
from portfolio.engine.worker_main import HEADER, write_message

log = logging.getLogger(__name__)
# While it waits for an answer, the parent looks this often whether the worker sits at its memory cap
# (`limits.at_cap`): a read of /proc and one prlimit call, so a wait costs nothing measurable.
CAP_CHECK_S = 0.25


class BudgetExpired(Exception):
    """The deadline passed before the worker answered; the worker was killed."""


class WorkerCrashed(Exception):
    """The worker process died or closed its channel without answering."""


class WorkerError(Exception):
    """The worker answered with an exception raised by the code it ran."""

    def __init__(self, message: str, traceback_text: str = "") -> None:
        super().__init__(message)
        self.traceback_text = traceback_text


class OutOfMemory(WorkerError):
    """The code the worker ran went over the memory cap (`portfolio.engine.limits`); the worker was replaced."""


def descendants(pid: int) -> list[int]:
    """The pids of every live process below `pid` (children, their children, ...), read from /proc; empty where
    /proc is missing. Read before killing: once `pid` dies its children are re-parented and the link is gone."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:  # pragma: no cover - not Linux
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'
                ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        parents.setdefault(ppid, []).append(int(entry))
    found, frontier = [], [pid]
    while frontier:
        children = parents.get(frontier.pop(), [])
        found += children
        frontier += children
    return found


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group led by `process`, and every process below it, and reap the leader.

    The group alone is not enough: a process that plans (a service's planner worker) starts its own killable
    workers and searches in process groups of their own, so that each can be killed at its deadline; killing the
    planner's group would leave them running until their own deadlines (`docs/decisions/worker-aborts.md`)."""
    below = descendants(process.pid)
    kill_own_group(process)
    for pid in below:
        for kill in (os.killpg, os.kill):  # the group where it leads one, else the process
            try:
                kill(pid, signal.SIGKILL)
                break
            except (ProcessLookupError, PermissionError):
                continue
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        log.warning("process %s did not die after SIGKILL", process.pid)


class WorkerProcess(Resource):
    """A long-lived `python -m portfolio.engine.worker_main` answering one request at a time, under this
    interpreter. `kills` counts the processes killed and replaced (a deadline, a crash, an out-of-memory error).
    `memory_limit_mb`: the limit an out-of-memory error reports; None: the cap `spawn` applies
    (`limits.limit_mb()`). A subclass whose process caps itself otherwise sets it to the limit in force."""

    memory_limit_mb: int | None = None

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self.preload = preload
        self.kills = 0
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._closed = False
        self.spawn()

    def spawn(self) -> None:
        """Start the worker process, or take the one `portfolio.engine.spares.prespawn` started for it."""
        command = spares.worker_command(self.preload)
        env = limits.capped_env()
        self._process = spares.take(command, env) or spares.start(command, env)  # under the memory cap

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def call(self, op: str, deadline: float, **kwargs: Any) -> Any:
        """Run `op(**kwargs)` in the worker; kill it and raise BudgetExpired if `deadline` passes first (or this
        thread's stop signal is set: `portfolio.engine.cancel`). Waiting for another thread's call counts against the
        deadline too."""
        while not self._lock.acquire(timeout=max(0.0, min(0.05, deadline - time.monotonic()))):
            if cancel.expired(deadline):
                raise BudgetExpired()
        try:
            if cancel.expired(deadline):  # nothing sent yet: the worker stays warm
                raise BudgetExpired()
            if self._closed:
                raise WorkerCrashed("the worker was closed")
            process = self._process
            if process is None or process.poll() is not None:
                self.spawn()
                process = self._process
            assert process is not None and process.stdin and process.stdout
            try:
                write_message(process.stdin, (op, kwargs))
                return self._receive(process, deadline)
            except BudgetExpired:
                self._replace(process)
                raise
            except (BrokenPipeError, EOFError, WorkerCrashed) as error:
                self._replace(process)
                raise WorkerCrashed(f"worker process died: {error}") from error
            except WorkerError as error:
                if not limits.is_out_of_memory(str(error)):
                    raise
                self._replace(process)  # a process that hit its cap may be left in a bad state
                limit = self.memory_limit_mb or limits.limit_mb()
                raise OutOfMemory(f"{limits.OUT_OF_MEMORY} (limit {limit} MB)") from error
        finally:
            self._lock.release()

    def _receive(self, process: subprocess.Popen[bytes], deadline: float) -> Any:
        """The next answer from `process`, read until `deadline` (BudgetExpired after it). A wait that runs out
        leaves the rest of a message it began in the channel, so the caller replaces `process`."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        buffer, needed, header_done = bytearray(), HEADER.size, False
        stuck_since: float | None = None
        while len(buffer) < needed:
            now = time.monotonic()
            remaining = deadline - now
            ready: list[int] = []
            if remaining > 0 and not cancel.stopped():
                ready, _, _ = select.select([fd, *cancel.stop_fds()], [], [], min(remaining, CAP_CHECK_S))
            if fd not in ready and time.monotonic() < deadline and not cancel.stopped():
                # no answer yet: a worker that sits at its memory cap is out of memory (`limits.at_cap`)
                stuck_since = (stuck_since or now) if limits.at_cap(process.pid) else None
                if stuck_since is not None and time.monotonic() - stuck_since >= limits.STUCK_AT_CAP_S:
                    raise WorkerError(f"MemoryError: {limits.OUT_OF_MEMORY} (stuck at its cap)", "")
                continue
            if fd not in ready:
                raise BudgetExpired()
            chunk = os.read(fd, max(needed - len(buffer), 65536) if header_done else needed - len(buffer))
            if not chunk:
                raise WorkerCrashed(f"exit code {_exit_code(process)}")
            buffer += chunk
            if not header_done and len(buffer) >= HEADER.size:
                (size,) = HEADER.unpack(bytes(buffer[: HEADER.size]))
                del buffer[: HEADER.size]
                needed = size
                header_done = True
        message = pickle.loads(bytes(buffer))
        if not message["ok"]:
            raise WorkerError(message["error"], message.get("traceback", ""))
        return message["value"]

    def _replace(self, process: subprocess.Popen[bytes]) -> None:
        self.kills += 1
        kill_group(process)
        if self._closed:
            self._process = None
        else:
            self.spawn()

    def close(self) -> None:
        """Kill the worker, a request in flight included (that call raises WorkerCrashed), without waiting for it
        first: a planner closed right after its start would otherwise wait for whatever its workers were asked
        to do first (`docs/decisions/worker-aborts.md`)."""
        self._closed = True
        process = self._process
        if process is not None:
            kill_group(process)
        with self._lock:  # the call in flight, if any, has seen its process die and handed the lock back
            if self._process is not None:
                if self._process is not process:
                    kill_group(self._process)
                self._process = None


def _exit_code(process: subprocess.Popen[bytes]) -> int | None:
    """The exit code of a process that just closed its channel (it may need a moment to finish dying)."""
    try:
        return process.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        return None
