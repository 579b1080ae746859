"""Killable workers: a warm Python worker process, and pre-started search processes.

A budget is only hard if whatever runs under it can be stopped. Both kinds of process here run in their own
process group, so on a deadline the whole group (the worker and anything it started) gets SIGKILL, and the next
call gets a fresh process. The replacement is started at once, in the background, so it is warm by then.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from portfolio.worker_main import HEADER, write_message

log = logging.getLogger(__name__)


class BudgetExpired(Exception):
    """The deadline passed before the worker answered; the worker was killed."""


class WorkerCrashed(Exception):
    """The worker process died or closed its channel without answering."""


class WorkerError(Exception):
    """The worker answered with an exception raised by the code it ran."""

    def __init__(self, message: str, traceback_text: str = "") -> None:
        super().__init__(message)
        self.traceback_text = traceback_text


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process group led by `process` and reap the leader."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # pragma: no cover - group already gone and pid reused
        process.kill()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        log.warning("process %s did not die after SIGKILL", process.pid)


class WorkerProcess:
    """A long-lived `python -m portfolio.worker_main` answering one request at a time."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self.preload = preload
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self.spawn()

    def spawn(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "portfolio.worker_main", *self.preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            bufsize=0,
        )

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def call(self, op: str, deadline: float, **kwargs: Any) -> Any:
        """Run `op(**kwargs)` in the worker; kill it and raise BudgetExpired if `deadline` passes first."""
        with self._lock:
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

    def _receive(self, process: subprocess.Popen, deadline: float) -> Any:
        assert process.stdout is not None
        fd = process.stdout.fileno()
        buffer = bytearray()
        needed = HEADER.size
        header_done = False
        while len(buffer) < needed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BudgetExpired()
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise BudgetExpired()
            chunk = os.read(fd, max(needed - len(buffer), 65536) if header_done else needed - len(buffer))
            if not chunk:
                raise WorkerCrashed(f"exit code {process.poll()}")
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

    def _replace(self, process: subprocess.Popen) -> None:
        kill_group(process)
        self.spawn()

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                kill_group(self._process)
                self._process = None


class SearchProcessPool:
    """Pre-started Fast Downward search processes, one per command line.

    The search binary spends a few milliseconds starting before it reads its task from stdin; starting the next
    process right after handing out the current one takes that off the next call's latency.
    """

    def __init__(self) -> None:
        self._ready: dict[tuple[str, ...], tuple[subprocess.Popen, str]] = {}
        self._lock = threading.Lock()

    def _start(self, command: tuple[str, ...], workdir_factory) -> tuple[subprocess.Popen, str]:
        workdir = workdir_factory()
        with open(os.path.join(workdir, "stdout"), "wb") as output:
            process = subprocess.Popen(
                [*command, "--internal-plan-file", os.path.join(workdir, "plan")],
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                start_new_session=True,
            )
        return process, workdir

    def take(self, command: tuple[str, ...], workdir_factory) -> tuple[subprocess.Popen, str]:
        """A started process for `command` (reading its task from stdin) and its private working directory."""
        with self._lock:
            ready = self._ready.pop(command, None)
            if ready is not None and ready[0].poll() is not None:
                ready = None
            if ready is None:
                ready = self._start(command, workdir_factory)
            self._ready[command] = self._start(command, workdir_factory)
            return ready

    def prestart(self, command: tuple[str, ...], workdir_factory) -> None:
        with self._lock:
            if command not in self._ready:
                self._ready[command] = self._start(command, workdir_factory)

    def close(self) -> None:
        with self._lock:
            for process, workdir in self._ready.values():
                kill_group(process)
                shutil.rmtree(workdir, ignore_errors=True)
            self._ready.clear()
