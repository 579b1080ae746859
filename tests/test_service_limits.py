"""Memory caps outside the service: every planner process the library starts (translator and pyperplan
workers, Fast Downward searches) runs under RLIMIT_AS, and exceeding it is an "out of memory" attempt."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import pytest
from support import REPO, poll
from test_service_helpers import BOOM_DOMAIN, boom_problem


def address_space_limit(pid: int) -> int:
    soft, _ = resource.prlimit(pid, resource.RLIMIT_AS)
    return soft


def test_every_planner_process_is_started_under_the_cap(monkeypatch):
    from portfolio.delegates.fast_downward.search_run import command
    from portfolio.planner import Planner

    monkeypatch.setenv("PORTFOLIO_MEMORY_LIMIT_MB", "777")
    with Planner(("fast-downward", "pyperplan")) as planner:
        fd = planner.fast_downward
        searches = fd._searches
        searches.prestart(command(fd.settings.alias))
        pids = [fd._translator().pid, planner._all_delegates()[1]._worker.pid]
        # warm-up pre-starts one per raced search, and the searches a call with costs runs (small task or not)
        searching = len(set(fd.warm_searches()))
        poll(lambda: len(searches._ready), lambda ready: ready >= searching, 10, every=0.01)
        pids += [run.process.pid for run in searches._ready.values()]
        assert len(pids) == 2 + searching
        for pid in pids:
            assert address_space_limit(pid) == 777 * 1024 * 1024, pid
    assert address_space_limit(os.getpid()) != 777 * 1024 * 1024  # the caller itself is left alone


def test_the_cli_reports_out_of_memory_and_the_cascade_goes_on(tmp_path):
    (tmp_path / "d.pddl").write_text(BOOM_DOMAIN)
    (tmp_path / "p.pddl").write_text(boom_problem())
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "portfolio.cli",
            "-v",  # the log (stderr) says which translator did what, should this fail again
            "plan",
            str(tmp_path / "d.pddl"),
            str(tmp_path / "p.pddl"),
            "--budget",
            "60",
            "--delegates",
            "fast-downward,pyperplan",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "PORTFOLIO_MEMORY_LIMIT_MB": "150"},
    )
    assert run.returncode == 1, run.stderr
    report = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "attempt fast-downward: memout" in run.stdout and "out of memory (limit 150 MB)" in run.stdout, report
    assert "attempt pyperplan:" in run.stdout, report


# CPython 3.11 spins instead of raising MemoryError when the exception unwinds to a `with` handler whose instruction
# offset (past the small-int cache) cannot be boxed for want of memory (python/cpython#132508): Fast Downward's
# translator grounds inside `with timers.timing(...)`, and CI saw translations hang at their cap for a whole budget.
SPIN_AT_CAP = """
import contextlib, gc
gc.disable()
def fill():
    a = 0
{padding}    node = None
    with contextlib.nullcontext():
        while True:
            node = (node, a)
            a += 1
fill()
"""


def test_a_worker_that_spins_at_its_memory_cap_is_out_of_memory_not_hung(monkeypatch, tmp_path):
    """The script fills its cap with small tuples inside a `with` block; unwinding to the handler then needs the
    very allocation that failed, and CPython retries it forever (a second run without the `with` raises
    MemoryError in 0.2 s). The parent sees the worker sit at its cap (`limits.at_cap`) and ends the call as out of
    memory, the worker replaced; before, the call waited out its whole deadline."""

    from portfolio.engine.workers import OutOfMemory, WorkerProcess

    script = tmp_path / "spin.py"
    script.write_text(SPIN_AT_CAP.format(padding="".join(f"    a += {i}\n" for i in range(150))))
    monkeypatch.setenv("PORTFOLIO_MEMORY_LIMIT_MB", "100")
    worker = WorkerProcess()
    try:
        worker.call("ping", time.monotonic() + 30)
        # OutOfMemory, not BudgetExpired: answered well before a deadline it used to wait out
        with pytest.raises(OutOfMemory):
            worker.call("runpy:run_path", time.monotonic() + 10, path_name=str(script))
        assert worker.kills == 1
        worker.call("ping", time.monotonic() + 30)  # a fresh worker answers
    finally:
        worker.close()


@pytest.mark.parametrize("cap_mb", [100, 120])
def test_a_worker_with_a_second_thread_runs_out_of_memory_at_once(monkeypatch, cap_mb):
    """A capped worker with a thread besides the main one (kill-with-parent's watch on its parent) answers BOOM
    with a memout in seconds. It crawled at its cap for minutes (seen at caps of 100-120 and 300 MB, not at
    130-200), first read as glibc's per-thread arenas; the cause was CPython's spin on a MemoryError unwinding to
    a `with` handler (`test_a_worker_that_spins_at_its_memory_cap_is_out_of_memory_not_hung`), which hits a
    translation only when its last allocation fails inside such a block: one run in ten here, more under load."""

    from portfolio.delegates.fast_downward.translate import PRELOAD, TRANSLATE_OP
    from portfolio.engine.workers import OutOfMemory, WorkerProcess

    monkeypatch.setenv("PORTFOLIO_MEMORY_LIMIT_MB", str(cap_mb))
    monkeypatch.setenv("PORTFOLIO_KILL_WITH_PARENT", "1")
    worker = WorkerProcess(preload=PRELOAD)
    try:
        worker.call("ping", time.monotonic() + 30)
        with pytest.raises(OutOfMemory):
            worker.call(TRANSLATE_OP, time.monotonic() + 15, domain_pddl=BOOM_DOMAIN, problem_pddl=boom_problem())
    finally:
        worker.close()
