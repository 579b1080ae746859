"""A worker past its deadline (`portfolio.engine.workers`): killed at once, with what it started, in the middle
of a translation or of an answer alike, and replaced; the next call answers from the fresh process."""

from __future__ import annotations

import select
import subprocess
import sys
import time

import pytest
from support import IPC, descendants, hardest_parking, wait_until

from portfolio.delegates.fast_downward import translate
from portfolio.engine.workers import BudgetExpired, WorkerProcess


@pytest.mark.serial  # asserts the caller is back soon after its deadline
def test_a_translator_worker_past_its_deadline_is_killed_and_replaced():
    parking = {
        "domain_pddl": (IPC / "parking-sat11-strips" / "domain.pddl").read_text(),
        "problem_pddl": hardest_parking().read_text(),  # ~10 s to translate
    }
    worker = WorkerProcess(preload=translate.PRELOAD)
    try:
        worker.call("ping", time.monotonic() + 30)
        pid = worker.pid
        deadline = time.monotonic() + 0.3
        with pytest.raises(BudgetExpired):
            worker.call(translate.TRANSLATE_OP, deadline, **parking)
        assert time.monotonic() - deadline < 0.5  # killed, not waited for
        assert worker.kills == 1 and worker.pid != pid and pid not in descendants()
        assert worker.call("ping", time.monotonic() + 30) == {"pong": True}  # from the fresh process
    finally:
        worker.close()


# serial: it asserts that no descendant of the test process is running, and beside other tests in the same xdist
# worker a session planner's warm-up can be (CI: one running pid in the parallel phase)
@pytest.mark.serial
def test_a_worker_stuck_outside_the_interpreter_is_killed_at_its_deadline():
    """`os.system` does not return to the interpreter until its command ends: the kill ends it all the same."""
    worker = WorkerProcess()
    try:
        worker.call("ping", time.monotonic() + 30)
        pid = worker.pid
        with pytest.raises(BudgetExpired):
            worker.call("os:system", time.monotonic() + 0.3, command="sleep 30")
        worker.call("ping", time.monotonic() + 30)  # answered by a new process
        assert worker.pid != pid and worker.kills == 1
        assert pid not in descendants()  # killed with its `sleep`
        # and nothing left busy: the replacement, up a moment ago, may still be finishing its start (a snapshot
        # caught it running 1 run in 3 once descendants were read with psutil)
        wait_until(lambda: not [p for p, (state, _) in descendants().items() if state == "R"], 5, "all idle")
    finally:
        worker.close()


# Writes the first half of an answer to its channel and then nothing more.
HALF_AN_ANSWER = """
import os, pickle, time
from portfolio.engine.worker_main import HEADER
payload = pickle.dumps({"ok": True, "value": "x" * 100_000})
message = HEADER.pack(len(payload)) + payload
os.write(1, message[:50_000])
time.sleep(60)
"""


class CutOff(WorkerProcess):
    """A worker whose first process answers only half of its first request; its replacements are real."""

    def spawn(self) -> None:
        if self.kills:
            super().spawn()
            return
        self._process = subprocess.Popen(
            [sys.executable, "-c", HALF_AN_ANSWER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            bufsize=0,
        )


def test_an_answer_a_deadline_cuts_in_the_middle_is_dropped_with_its_process():
    """The rest of a message a wait began is still in the channel: a next call on that process would read a
    payload byte as its length header. The process goes instead, and the next call reads a whole answer."""
    worker = CutOff()
    half = worker.pid
    try:
        assert worker._process is not None and worker._process.stdout is not None
        channel = worker._process.stdout.fileno()
        wait_until(lambda: select.select([channel], [], [], 0)[0], 30, "the first half of the answer")
        with pytest.raises(BudgetExpired):
            worker.call("ping", time.monotonic() + 2)
        assert worker.kills == 1 and worker.pid != half and half not in descendants()
        assert worker.call("ping", time.monotonic() + 30) == {"pong": True}
    finally:
        worker.close()
