"""Killing a worker kills everything below it, including processes that lead process groups of their own (a
service's planner worker starts its translator worker and searches that way, so each can be killed alone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from portfolio.workers import descendants, kill_group

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
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    child = int(parent.stdout.readline())
    try:
        assert child in descendants(parent.pid) and os.getpgid(child) != os.getpgid(parent.pid)
        kill_group(parent)
        deadline = time.monotonic() + 5
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(child), "the grandchild in its own process group outlived its parent's kill"
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
