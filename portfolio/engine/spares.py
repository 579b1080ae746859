"""Worker processes started before their `WorkerProcess` exists, so that their start overlaps the parent's own.

`portfolio plan` is one process that imports its modules before it builds the `Planner`, whose translator worker
then starts while the task waits for it (the times: `docs/benchmarks.md`, "Cold start"). `prespawn` starts that
worker first thing, with the command line, environment and memory cap `WorkerProcess.spawn` would give it;
`WorkerProcess` `take`s it when one with the same command line and environment is built, and starts its own
otherwise. `discard` kills the spares no one took: the CLI calls it before it returns, so nothing it started
outlives it (a bad input's exit 2 included).

Imports nothing heavy (no pydantic): that is the point of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from portfolio.engine import limits

_spares: dict[tuple[str, ...], tuple[dict[str, str], subprocess.Popen[bytes]]] = {}
_lock = threading.Lock()


def worker_command(preload: tuple[str, ...]) -> list[str]:
    """The command line of a worker, under this interpreter, that imports `preload` at start
    (`portfolio.engine.worker_main`)."""
    return [sys.executable, "-m", "portfolio.engine.worker_main", *preload]


def start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a worker process: its own session (a group that can be killed whole), pipes on stdin and stdout,
    under the memory cap (`limits.cap`)."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        bufsize=0,
        env=env,
    )
    limits.cap(process)
    return process


def prespawn(preload: tuple[str, ...]) -> None:
    """Start a worker for a later `WorkerProcess(preload)` to take (one a command line), in the environment this
    process has now."""
    command = worker_command(preload)
    with _lock:
        if tuple(command) in _spares:
            return
    full_env = limits.capped_env()
    process = start(command, full_env)
    with _lock:
        other = _spares.setdefault(tuple(command), (full_env, process))[1]
    if other is not process:  # another caller's spare went in meanwhile: one spare a command line
        _kill(process)


def take(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes] | None:
    """The spare started with `command` and `env`, still running, or None; it is no longer a spare. One started
    with another environment (the parent's changed since) is killed, not handed out."""
    with _lock:
        spare = _spares.pop(tuple(command), None)
    if spare is None:
        return None
    spare_env, process = spare
    if spare_env != env or process.poll() is not None:
        _kill(process)
        return None
    limits.cap(process)  # the cap in force now, should it have changed since the start
    return process


def discard() -> None:
    """Kill every spare no `WorkerProcess` took."""
    with _lock:
        spares = list(_spares.values())
        _spares.clear()
    for _, process in spares:
        _kill(process)


def kill_own_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group `process` leads, without reaping it: all a process that starts no other needs
    (a search: `portfolio.engine.search_pool`), and no read of /proc."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # pragma: no cover - group already gone and pid reused
        process.kill()


def _kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the spare's group and reap it: a worker starts no process of its own before its first request."""
    kill_own_group(process)
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()
