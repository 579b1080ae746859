"""Memory caps for planner processes: one task whose grounding explodes must not take the whole machine.

Every process that runs planning code on a task (the translator worker, the pyperplan worker, each Fast Downward
search, the service's planner workers) runs with `RLIMIT_AS` set. Past its cap a Python worker raises
`MemoryError` (reported as an attempt with status `memout`, reason `OUT_OF_MEMORY`; the worker is replaced) and
the search binary exits with its out-of-memory code; the cascade goes on with the next delegate. A Python worker
that spins at its cap instead of raising (`at_cap`) is ended the same way by the parent that waits for it.

Entry points:
- `configure(megabytes, kill_with_parent)` sets the cap (and parent-death kills) for every planner process this
  process starts; it travels in the environment (`PORTFOLIO_MEMORY_LIMIT_MB`), so the service's planner workers
  and their own children see the limit the server was given. `limit_mb()` reads it back; unset, it is
  `default_limit_mb(processes)`: half the physical memory divided among `processes`, at least 1 GiB.
- `tree_share_mb(budget_mb, processes)`: the service's `--memory-limit` is one budget per request, and a
  request runs in one planner worker's process tree (the worker, the translator worker, the pyperplan worker,
  one search per raced configuration); each process gets an equal share as its cap, so what one request's
  processes may allocate sums to the budget. The shares count task memory: each Python process also maps a
  fixed start-up footprint (`portfolio.serve.worker.WORKER_HEADROOM_MB` for the planner worker).
- `cap(process)` puts a just-started planner process under the cap from the parent; `apply_to_self(megabytes)`
  caps the calling process; `capped_env()` is the environment to start a capped Python process with.
- `die_with_parent_if_asked()` (called first by a Python planner worker) and `with_parent_death()` (the command
  prefix for the search binary, util-linux's `setpriv --pdeathsig KILL`): with `PORTFOLIO_KILL_WITH_PARENT=1`
  (set for the service's planner workers), a planner worker killed with SIGKILL leaves no translator, pyperplan
  worker or running search behind. Opt-in, because it is only safe where children are started from threads that
  outlive them. Without `setpriv` on the PATH, pre-started searches still exit when their input closes.
- `at_cap(pid)` and `is_out_of_memory(message)`: whether a worker is stuck at its cap, or failed allocating.

Why address space and a sum of per-process caps, not a cgroup: `docs/decisions/memory-caps.md`."""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import select
import shutil
import signal
import subprocess
import threading
import time

from portfolio.engine.child_env import child_env

ENV_LIMIT = "PORTFOLIO_MEMORY_LIMIT_MB"
ENV_KILL_WITH_PARENT = "PORTFOLIO_KILL_WITH_PARENT"
OUT_OF_MEMORY = "out of memory"
# The environment of a Python process started under the cap: one malloc arena. The GIL runs one thread at a time,
# so a shared arena costs nothing measurable, and it keeps the address space a worker reserves near what it uses
# (`docs/decisions/memory-caps.md`).
CAPPED_ENV = {"MALLOC_ARENA_MAX": "1"}


def capped_env(extra: dict[str, str] | None = None, keep: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of a Python process started under the cap: this one's without its secrets (but those named
    in `keep`: `portfolio.engine.child_env`), `CAPPED_ENV`, then `extra`."""
    return child_env({**CAPPED_ENV, **(extra or {})}, keep=keep)


_PR_SET_PDEATHSIG = 1
MIN_DEFAULT_MB = 1024


def physical_memory_mb() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)


def default_limit_mb(processes: int = 1) -> int:
    """A share of the machine: half the physical memory divided among `processes` planners, at least 1 GiB."""
    return max(MIN_DEFAULT_MB, physical_memory_mb() // (2 * max(1, processes)))


def tree_share_mb(budget_mb: int, processes: int) -> int:
    """Each process's cap when `processes` processes share one request's budget of `budget_mb`."""
    return max(1, int(budget_mb) // max(1, processes))


def limit_mb() -> int:
    """The cap in force for planner processes started from here (MB)."""
    text = os.environ.get(ENV_LIMIT, "")
    return int(text) if text.isdigit() and int(text) > 0 else default_limit_mb()


def configure(megabytes: int | None, kill_with_parent: bool | None = None) -> None:
    """Set the cap (and optionally parent-death kills) for every planner process this process starts."""
    if megabytes is not None:
        if megabytes <= 0:
            raise ValueError(f"a memory limit must be a positive number of MB, got {megabytes}")
        os.environ[ENV_LIMIT] = str(int(megabytes))
    if kill_with_parent is not None:
        os.environ[ENV_KILL_WITH_PARENT] = "1" if kill_with_parent else ""


def apply_to_self(megabytes: int) -> None:
    """Cap this process's address space (used by a process on itself, e.g. the service's planner worker)."""
    size = int(megabytes) * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        size = min(size, hard)
    resource.setrlimit(resource.RLIMIT_AS, (size, hard))


def die_with_parent() -> None:
    """Ask the kernel for SIGKILL when the parent dies (Linux; a no-op elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def with_parent_death() -> tuple[str, ...]:
    """The command prefix that makes a binary die with the thread that started it, when
    `PORTFOLIO_KILL_WITH_PARENT=1` and `setpriv` is installed; else nothing."""
    if os.environ.get(ENV_KILL_WITH_PARENT) != "1":
        return ()
    setpriv = _setpriv()
    return (setpriv, "--pdeathsig", "KILL", "--") if setpriv else ()


@functools.cache
def _setpriv() -> str | None:
    """Where `setpriv` is (looked up once per process: this is on the path of every search started)."""
    return shutil.which("setpriv")


def cap(process: subprocess.Popen[bytes]) -> None:
    """Put a just-started planner process under the cap (`prlimit` from the parent). Not a `preexec_fn`: that
    makes Python fork instead of vfork, a cost on the path of every search (`docs/decisions/memory-caps.md`).
    Nothing is lost by setting it a moment after the start: a planner process allocates for its task only once the
    task is sent, after this call."""
    size = limit_mb() * 1024 * 1024
    try:
        _, hard = resource.prlimit(process.pid, resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            size = min(size, hard)
        resource.prlimit(process.pid, resource.RLIMIT_AS, (size, hard))
    except (ProcessLookupError, PermissionError):  # already gone: nothing to cap
        pass


def die_with_parent_if_asked() -> None:
    """Called first thing by a Python planner worker: with `PORTFOLIO_KILL_WITH_PARENT=1`, exit when the process
    that started it ends, and at once if it is already gone (reparented to init).

    Not `die_with_parent` (the kernel's PR_SET_PDEATHSIG): that fires when the parent *thread* ends, and a
    translator worker is replaced on the thread of the call that killed the old one (a race's thread, a
    delegate's), which ends with the call: the fresh worker was killed with it and the next call started cold.
    A thread of the worker's own waits on the parent instead (a pidfd; polling `getppid` where there is none).
    It needs the GIL to exit, so a worker stuck in C code that holds it would not notice, where the kernel's
    signal would have killed it. The one such case seen: translator workers left spinning at their memory cap
    for 30 minutes after their parent died, CPython's spin on a `MemoryError` (`at_cap`). While the parent lives
    it ends such a worker (`portfolio.engine.workers`); a parent killed during the spin still leaves it running."""
    if os.environ.get(ENV_KILL_WITH_PARENT) != "1":
        return
    parent = os.getppid()
    if parent == 1:
        os._exit(1)
    threading.Thread(target=_exit_with, args=(parent,), name="parent-watch", daemon=True).start()


def _exit_with(parent: int) -> None:
    """Exit this process (no clean-up: its parent is gone mid-request, perhaps killed) once `parent` has ended."""
    try:
        handle = os.pidfd_open(parent)
    except (AttributeError, OSError):  # no pidfd (an old kernel), or the parent already gone
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)
    select.select([handle], [], [])  # readable once the process has ended
    os._exit(1)


# A Python worker whose address space has stayed within this much of its cap for `STUCK_AT_CAP_S` is out of
# memory, answered or not: below 1 MB it cannot map an allocator arena (CPython's are 1 MB).
AT_CAP_MARGIN_BYTES = 1 << 20
STUCK_AT_CAP_S = 0.5


def at_cap(pid: int) -> bool:
    """Whether process `pid` has an address-space cap and has used it up to `AT_CAP_MARGIN_BYTES`.

    Why a parent needs to ask: CPython 3.11 can spin instead of raising `MemoryError`. Unwinding an exception to a
    `with` or `finally` handler boxes the frame's instruction offset as an int; when that allocation fails too it
    unwinds to the same handler again, forever (`goto exception_unwind` in ceval.c; fixed in CPython 3.14 with tagged
    ints). Fast Downward's translator runs its grounding inside `with timers.timing(...)`, so a capped translator
    worker can spin there until its deadline (what was observed: `docs/decisions/memory-caps.md`)."""
    try:
        soft, _ = resource.prlimit(pid, resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return False
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024 >= soft - AT_CAP_MARGIN_BYTES
    except (OSError, ValueError):
        return False
    return False


def is_out_of_memory(message: str) -> bool:
    """Whether a worker's error message is an allocation failure."""
    return message.startswith("MemoryError") or OUT_OF_MEMORY in message
