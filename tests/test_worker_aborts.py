"""Workers stopped at a deadline without being killed (`portfolio.engine.workers`, `worker_main.ABORT_SIGNAL`):
a translator worker given a grace answers the abort and stays, one that cannot answer is killed after it, and an
answer cut in the middle by a deadline is read on where it stopped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support import IPC, descendants, hardest_parking, wait_until

from portfolio.delegates.fast_downward import translate
from portfolio.engine.workers import BudgetExpired, WorkerProcess


def texts(domain: Path, problem: Path) -> dict[str, str]:
    return {"domain_pddl": domain.read_text(), "problem_pddl": problem.read_text()}


def cpu_seconds(pid: int) -> float:
    return descendants()[pid][1]


@pytest.mark.serial
def test_a_translator_worker_stopped_at_its_deadline_answers_the_abort_and_stays_idle():
    """With a grace, the caller returns at its deadline while the worker unwinds the stopped translation in the
    background (CPython: ~0.5 s after a 1.5 s translation); the worker answers, is kept, and translates no more."""
    parking = texts(IPC / "parking-sat11-strips" / "domain.pddl", hardest_parking())  # ~10 s to translate
    worker = WorkerProcess(preload=translate.PRELOAD, abort_grace_s=10.0)
    try:
        worker.call("ping", time.monotonic() + 30)
        pid = worker.pid
        for budget in (0.3, 1.5):
            started = time.monotonic()
            with pytest.raises(BudgetExpired):
                worker.call(translate.TRANSLATE_OP, time.monotonic() + budget, **parking)
            assert time.monotonic() - started < budget + 0.1  # the caller is not kept waiting for the abort
            worker.call("ping", time.monotonic() + 15)  # waits for the abort's answer, then answers
        assert worker.pid == pid and (worker.aborts, worker.kills) == (2, 0)
        assert pid is not None
        before = cpu_seconds(pid)
        time.sleep(0.5)  # time passing is the point: the CPU it uses over half a second
        assert cpu_seconds(pid) - before < 0.05  # stopped: idle, not translating on
    finally:
        worker.close()


# serial: it asserts that no descendant of the test process is running, and beside other tests in the same xdist
# worker a session planner's warm-up can be (CI: one running pid in the parallel phase)
@pytest.mark.serial
def test_a_worker_that_does_not_answer_the_abort_is_killed_after_the_grace():
    """`os.system` does not return to the interpreter until its command ends, so the abort cannot stop it."""
    worker = WorkerProcess(abort_grace_s=0.3)
    try:
        worker.call("ping", time.monotonic() + 30)
        pid = worker.pid
        with pytest.raises(BudgetExpired):
            worker.call("os:system", time.monotonic() + 0.3, command="sleep 30")
        worker.call("ping", time.monotonic() + 5)  # waits out the grace, then answers from a new process
        assert worker.pid != pid and (worker.aborts, worker.kills) == (0, 1)
        assert pid not in descendants()  # killed with its `sleep`
        # and nothing left busy: the replacement, up a moment ago, may still be finishing its start (a snapshot
        # caught it running 1 run in 3 once descendants were read with psutil)
        wait_until(lambda: not [p for p, (state, _) in descendants().items() if state == "R"], 5, "all idle")
    finally:
        worker.close()


HALVES = """
import os, pickle, struct, sys, time
from portfolio.engine.worker_main import HEADER
payload = pickle.dumps({"ok": True, "value": "x" * 100_000})
message = HEADER.pack(len(payload)) + payload
os.write(1, message[:50_000])
time.sleep(1.0)
os.write(1, message[50_000:])
"""


def test_an_answer_a_deadline_cut_in_the_middle_is_read_on_where_it_stopped():
    """The abort's drain waits for the rest of an answer the call's deadline cut off mid-message: starting afresh
    read a payload byte as the length header (an `OverflowError`, and a warm worker killed for it)."""
    import subprocess
    import sys

    worker = WorkerProcess()
    half = subprocess.Popen([sys.executable, "-c", HALVES], stdout=subprocess.PIPE, bufsize=0)
    try:
        with pytest.raises(BudgetExpired):
            worker._receive(half, time.monotonic() + 0.4)  # the first half only
        assert worker._receive(half, time.monotonic() + 10) == "x" * 100_000
    finally:
        half.kill()
        half.wait()
        worker.close()
