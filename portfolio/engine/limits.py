"""Memory caps for planner processes: one task whose grounding explodes must not take the whole machine.

Every process that runs planning code on a task (the translator worker, the pyperplan worker, each Fast Downward
search, and the service's planner workers) runs with `RLIMIT_AS` set, by `cap()` at the spawn points in
`portfolio.engine.workers`. Exceeding the cap makes Python raise `MemoryError` in the worker (reported back as an
attempt with status `memout` and reason "out of memory", and the worker is replaced) and makes the search binary
exit with its out-of-memory code; the cascade goes on with the next delegate. A Python worker that spins at its
cap instead of raising (a CPython 3.11 bug: `at_cap`) is ended the same way by the parent that waits for it.

The cap travels in the environment (`PORTFOLIO_MEMORY_LIMIT_MB`), so the service's planner workers and their
own children see the limit the server was given. Unset, it defaults to a share of the machine: half the
physical memory for the CLI, divided by the number of planner workers for the service (`--memory-limit`).
`RLIMIT_AS` caps address space, not resident memory: measured here, a warm translator worker maps ~37 MB and a
search process ~9 MB, so the cap bites on what the task allocates, not on start-up.

The service's `--memory-limit` is one budget per request, not per process: a request runs in one planner
worker's process tree (the worker, which parses; the translator worker; the pyperplan worker; one Fast
Downward search per raced configuration), and each of those processes gets an equal share of the budget as
its cap (`tree_share_mb`), so what one request's processes may allocate sums to the budget. (Capping every
process at the whole limit let one request use 2.1 GB across a tree with a 1,024 MB limit.) The shares
count task memory: each Python process also maps a fixed start-up footprint (the planner worker is given
`WORKER_HEADROOM_MB` for it), which is the same for every request. cgroup v2 would let the kernel charge the
tree as a whole (and resident memory, not address space); this machine has cgroup v1 only, so the sum of
caps is the mechanism here. The default budget fits the machine: half the physical memory divided among
every process that holds a request at once (planner workers and validators, `default_limit_mb`).

`PORTFOLIO_KILL_WITH_PARENT=1` (set for the service's planner workers) makes the Python planner workers exit when
the process that started them ends (`die_with_parent_if_asked`: a thread that waits on the parent): a planner
worker killed with SIGKILL (out of memory, hung, or the whole server killed) then leaves no translator or
pyperplan worker behind.
The search binary runs no Python, so it is started through util-linux's `setpriv --pdeathsig KILL`
(`with_parent_death`), which asks the same of the kernel and then execs it (same pid, so the process group and
the memory cap apply unchanged): a search already running when its planner worker is killed dies with it
instead of running to its end. Not a `preexec_fn` (see `cap`). Without `setpriv` on the PATH, pre-started
searches still exit when their input closes. Opt-in, because it is only safe where children are started from
threads that outlive them (the search pool's own thread, or the thread that takes, runs and releases a search).
"""

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
# The environment of a Python process started under the cap: one malloc arena. It was set for a translator worker
# that crawled at its cap with thousands of failed mmap calls a second, read then as glibc trying a new per-thread
# arena (128 MB of address space each) for every small allocation. The crawl was CPython's own spin (`at_cap`): it
# comes back with one arena and with one thread, and the arena setting alone did not stop it on CI. Kept because
# the GIL runs one thread at a time, so a shared arena costs nothing measurable, and it keeps the address space
# a worker reserves near what it uses.
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
    makes Python fork instead of vfork, measured at 88 ms instead of 5 ms per spawn from a 400 MB parent, on the
    path of every search. Nothing is lost by setting it a moment after the start: a planner process allocates
    for its task only once the task is sent, after this call."""
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
    except (AttributeError, OSError):  # no pidfd (an old kernel, PyPy 3.9), or the parent already gone
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
    unwinds to the same handler again, forever (`goto exception_unwind` in ceval.c; python/cpython#132508, fixed
    in 3.14 with tagged ints). Fast Downward's translator runs its grounding inside `with timers.timing(...)`:
    gdb showed a capped translator worker retrying `PyLong_FromLong(317)` there for the whole 30 s of a request,
    2,700 failed `mmap` calls a second, while a second try of the same task raised `MemoryError` in 1 s."""
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
