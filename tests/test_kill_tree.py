"""Killing a worker kills everything below it, including processes that lead process groups of their own (a
service's planner worker starts its translator worker and searches that way, so each can be killed alone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import wait_until

from portfolio.engine.workers import descendants, kill_group

# A parent in its own session that starts a child in another session (as planner workers start searches), prints
# the child's pid, and waits.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie has ended
    except OSError:
        return False


def test_kill_group_kills_descendants_in_other_process_groups():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = int(parent.stdout.readline())
    try:
        assert child in descendants(parent.pid) and os.getpgid(child) != os.getpgid(parent.pid)
        kill_group(parent)
        wait_until(lambda: not alive(child), 5, "the grandchild in its own process group to die with its parent")
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        parent.stdout.close()


def test_descendants_of_a_process_without_children_is_empty():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert descendants(process.pid) == []
    finally:
        kill_group(process)


# A planner process (as the service's planner workers run, with PORTFOLIO_KILL_WITH_PARENT=1) that hands a long
# search to a pre-started Fast Downward process, prints the search's pid once it is searching, and waits.
SEARCHING = """
import sys, time
sys.path.insert(0, {root!r})
from support import load_ipc
from portfolio.delegates.fast_downward.searches import search_binary
from portfolio.delegates.fast_downward.translate import translate
from portfolio.engine.search_pool import SearchProcessPool
task = load_ipc("blocks", "probBLOCKS-12-0.pddl")
sas = translate(task.domain_pddl, task.problem_pddl).sas
pool = SearchProcessPool()
run = pool.take((str(search_binary()), "--search", "astar(blind())"))  # minutes on this task
run.process.stdin.write(sas.encode()); run.process.stdin.close()
print(run.process.pid, flush=True)
time.sleep(60)
"""


def assert_child_dies_with_its_parent(script: str, what: str) -> None:
    """Run `script` (which prints a child's pid, then waits) as a planner process with kill-with-parent; the child
    must be alive half a second later, and gone within 5 s of the planner's SIGKILL (no clean-up code runs)."""
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PORTFOLIO_KILL_WITH_PARENT": "1",
        "PYTHONPATH": os.pathsep.join([root, str(Path(root) / "tests")]),
    }
    parent = subprocess.Popen(
        [sys.executable, "-c", script.format(root=root)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    child = None
    try:
        child = int(parent.stdout.readline())
        # time passing is the point: a child that ends on its own (a failed start) would be gone by now, and its
        # end after the parent's would prove nothing
        time.sleep(0.5)
        assert alive(child), f"the {what} should still be running"
        parent.kill()
        parent.wait()
        wait_until(lambda: not alive(child), 5, f"the {what} to end with its planner process")
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_search_dies_with_its_planner_process_when_asked():
    """A planner worker killed with SIGKILL while Fast Downward searches for it: with kill-with-parent the search
    goes too. Before, it ran to its own end (minutes of a core) with nobody to read its plan."""
    assert_child_dies_with_its_parent(SEARCHING, "search")


# A planner process (kill-with-parent, as in the service) whose Python worker is started on a thread that then
# ends, as a carried-over delegate's thread replaces a worker killed at a deadline; prints the worker's pid and waits.
THREAD_STARTED = """
import sys, threading, time
sys.path.insert(0, {root!r})
from portfolio.engine.workers import WorkerProcess
box = []
def start():
    box.append(WorkerProcess())
    box[0].call("ping", time.monotonic() + 30)  # imports done: the worker has asked to die with its parent
thread = threading.Thread(target=start)
thread.start(); thread.join()
print(box[0].pid, flush=True)
time.sleep(60)
"""


def test_a_python_worker_outlives_the_thread_that_started_it_and_dies_with_its_process():
    """Kill-with-parent follows the parent process, not the thread that spawned the worker. It was the kernel's
    PR_SET_PDEATHSIG, which fires when that *thread* ends: in the service, a translator worker replaced on a race's
    thread was killed as soon as the thread ended, and the next call started a cold one."""
    assert_child_dies_with_its_parent(THREAD_STARTED, "worker")
