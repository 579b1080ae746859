"""Pre-started Fast Downward search processes, and waiting on several of them at once.

The search binary spends milliseconds starting before it reads its task from stdin, and starting a process from
Python costs milliseconds more, so `SearchProcessPool` keeps one started per command line. Each runs in its own
process group under the memory cap (`portfolio.engine.limits`), so a deadline kills it and anything it started
(`portfolio.engine.workers.kill_group`). Its working files live in a directory per pool, swept when the process
that made it is gone (`sweep_stale_dirs`).
"""

from __future__ import annotations

import glob
import itertools
import logging
import os
import queue
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from portfolio.engine import cancel, limits
from portfolio.engine.child_env import child_env
from portfolio.engine.results import Resource
from portfolio.engine.spares import kill_own_group
from portfolio.engine.workers import kill_group

log = logging.getLogger(__name__)


@dataclass
class SearchRun:
    """A started search process waiting for its task on stdin, and where its plan and output go."""

    process: subprocess.Popen[bytes]
    plan_path: str
    output_path: str
    command: tuple[str, ...] = ()


class SearchProcessPool(Resource):
    """Pre-started Fast Downward search processes, one per command line.

    The search binary spends milliseconds starting before it reads its task from stdin, and starting a process
    from Python costs milliseconds more. A run given back is killed at once; it is reaped, its files removed and
    its replacement started on a background thread, none of it on the caller's path. The replacement starts when
    the run is given back, not when it is taken, so it never competes with the racing searches for the cores
    (`docs/decisions/search-pool.md`).
    """

    def __init__(self) -> None:
        sweep_stale_dirs()
        self._dir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-")
        self._ready: dict[tuple[str, ...], SearchRun] = {}
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self._closed = False
        self._chores: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._helper = threading.Thread(target=self._do_chores, name="search-pool", daemon=True)
        self._helper.start()

    def _start(self, command: tuple[str, ...]) -> SearchRun:
        number = next(self._numbers)
        plan_path = os.path.join(self._dir, f"plan-{number}")
        output_path = os.path.join(self._dir, f"output-{number}")
        with open(output_path, "wb") as output:
            process = subprocess.Popen(
                [*limits.with_parent_death(), *command, "--internal-plan-file", plan_path],
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self._dir,
                start_new_session=True,
                env=child_env(),  # no secrets (`portfolio.engine.child_env`)
            )
        limits.cap(process)  # memory cap (see portfolio.engine.limits)
        return SearchRun(process, plan_path, output_path, command)

    def _do_chores(self) -> None:
        while True:
            chore = self._chores.get()
            if chore is None:
                return
            try:
                chore()
            except Exception:
                log.debug("search pool chore failed", exc_info=True)

    def _refill(self, command: tuple[str, ...]) -> None:
        with self._lock:
            if self._closed or command in self._ready:
                return
        run = self._start(command)
        with self._lock:
            if self._closed or command in self._ready:
                stale = run
            else:
                self._ready[command] = run
                return
        _reap(stale)  # on the pool's thread already, and after close() no chore would run

    def take(self, command: tuple[str, ...]) -> SearchRun:
        """A started process for `command`; give it back with `release` when done."""
        with self._lock:
            run = self._ready.pop(command, None)
        if run is None or run.process.poll() is not None:
            if run is not None:
                self._discard(run)
            run = self._start(command)
        return run

    def prestart(self, command: tuple[str, ...]) -> None:
        self._chores.put(lambda: self._refill(command))

    def release(self, run: SearchRun) -> None:
        """Give a taken run back: stopped now if it is still going (its process group: a search starts no other),
        reaped, its files removed and its command's replacement started on the pool's thread."""
        if run.process.poll() is None:
            kill_own_group(run.process)
        self._discard(run)
        if run.command:
            self._chores.put(lambda: self._refill(run.command))

    def _discard(self, run: SearchRun) -> None:
        """Have the pool's thread `_reap` the run."""
        self._chores.put(lambda: _reap(run))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            runs = list(self._ready.values())
            self._ready.clear()
        # A search leads its own process group and starts no other (`kill_own_group`: no read of /proc); every
        # group is signalled before the first is reaped, so they die side by side.
        for run in runs:
            kill_own_group(run.process)
        for run in runs:
            try:
                run.process.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                log.warning("search process %s did not die after SIGKILL", run.process.pid)
        self._chores.put(None)
        self._helper.join(timeout=5)
        shutil.rmtree(self._dir, ignore_errors=True)


DIR_PREFIX = "portfolio-fd-"
_swept = False


def sweep_stale_dirs(root: str | None = None) -> list[str]:
    """Remove the search pools' temporary directories (`portfolio-fd-PID-*`) whose process is gone, once per
    process (the first pool it makes): a process killed with SIGKILL, a server stopped mid-request or a
    replaced planner worker never ran its `close`, and nothing else would ever remove them (11 were left by
    one review). Only this user's directories, only when the PID in the name is not running: a live process's
    directory is never touched (a reused PID keeps a stale one until that process ends too). Directories of
    releases that did not put the PID in the name are left alone. Returns the paths removed."""
    global _swept
    if root is None:
        if _swept:
            return []
        _swept = True
    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        owner = entry.name[len(DIR_PREFIX) :].split("-", 1)[0] if entry.name.startswith(DIR_PREFIX) else ""
        if not owner.isdigit() or int(owner) == os.getpid():
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            os.kill(int(owner), 0)
        except ProcessLookupError:  # the owner is gone: its directory is stale
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        except OSError:  # alive (or not ours to signal): leave it
            continue
    if removed:
        log.info("removed %d stale search directories of ended processes", len(removed))
    return removed


def _reap(run: SearchRun) -> None:
    """Kill what is left of the run, reap it and remove its files."""
    if run.process.poll() is None:
        kill_group(run.process)
    else:
        run.process.wait()
    if run.process.stdin:
        run.process.stdin.close()
    # an iterated search writes PLAN.1, PLAN.2, ... (`portfolio.delegates.fast_downward.anytime`)
    _unlink(run.plan_path, run.output_path, *glob.glob(glob.escape(run.plan_path) + ".*"))


def _unlink(*paths: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def wait_any(processes: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """Block until one of `processes` exits, `timeout` seconds pass or this thread's stop signal is set
    (`portfolio.engine.cancel`), without polling (Linux pidfds)."""
    fds = []
    try:
        for process in processes:
            try:
                fds.append(os.pidfd_open(process.pid))
            except (OSError, AttributeError):
                time.sleep(min(timeout, 0.001))  # no pidfds here: fall back to a short sleep
                return
        select.select(fds + cancel.stop_fds(), [], [], max(timeout, 0.0))
    finally:
        for fd in fds:
            os.close(fd)
