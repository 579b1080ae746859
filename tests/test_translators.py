"""The translator race (`portfolio.delegates.fast_downward.translators`): CPython on every task, a warm PyPy on
the large ones, the same SAS text either way; and workers stopped at a deadline without being killed
(`portfolio.engine.workers`, `worker_main.ABORT_SIGNAL`). The PyPy tests need Debian's pypy3 (`.ci/run` installs
it); the fallbacks are tested with interpreters that cannot run the worker."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import pytest
from support import IPC, IPC_MORE, descendants, hardest_parking, running, wait_until

from portfolio.delegates.fast_downward import translate
from portfolio.delegates.fast_downward.translators import PYPY_NURSERY, Translators, find_python, worker_env
from portfolio.engine.workers import BudgetExpired, WorkerProcess

PYPY = shutil.which("pypy3")
needs_pypy = pytest.mark.skipif(PYPY is None, reason="Debian's pypy3 is not installed (.ci/run installs it)")
TETRIS = IPC_MORE / "tetris-sat14-strips"  # p020: ~1.3 s under CPython, ~0.6 s under a warm PyPy


def texts(domain: Path, problem: Path) -> dict[str, str]:
    return {"domain_pddl": domain.read_text(), "problem_pddl": problem.read_text()}


def cpu_seconds(pid: int) -> float:
    return descendants()[pid][1]


@needs_pypy
def test_a_large_task_is_translated_by_a_warm_pypy_into_the_same_sas():
    task = texts(TETRIS / "domain.pddl", TETRIS / "p020.pddl")
    reference = translate.translate(task["domain_pddl"], task["problem_pddl"])
    translators = Translators(PYPY)
    try:
        answers = [translators.translate(time.monotonic() + 60, **task) for _ in range(4)]
        # PyPy loses while cold and wins once warm (0.6-0.8 s against CPython's 1.3 s): allow one slow round
        assert "pypy3" in [a.translator for a in answers[2:]], [a.translator for a in answers]
        assert all(a.value["sas"] == reference.sas for a in answers)  # byte for byte, whoever wrote it
    finally:
        translators.close()


def test_small_tasks_never_start_the_second_interpreter():
    """A task CPython answers before the second interpreter's turn never starts it. The turn is 1 s here, not
    the default 50 ms: blocks-4 takes 10 ms, but a loaded machine (two other test runs) once took longer."""
    blocks = texts(IPC / "blocks" / "domain.pddl", IPC / "blocks" / "probBLOCKS-4-0.pddl")
    translators = Translators(PYPY or shutil.which("python3"), pypy_after_s=1.0)
    try:
        for _ in range(3):
            assert translators.translate(time.monotonic() + 30, **blocks).translator == "cpython"
        assert translators.second is None  # answered before its turn: no process was started for it
    finally:
        translators.close()


def test_off_means_cpython_only_and_a_wrong_name_is_refused(monkeypatch):
    assert find_python("off") is None and find_python("none") is None
    monkeypatch.setenv("PORTFOLIO_TRANSLATOR_PYTHON", "off")
    assert find_python() is None
    monkeypatch.setenv("PORTFOLIO_TRANSLATOR_PYTHON", "no-such-python")
    with pytest.raises(ValueError, match="PORTFOLIO_TRANSLATOR_PYTHON 'no-such-python': no such executable"):
        find_python()
    with pytest.raises(ValueError, match="--translator-python 'nope': no such executable"):
        find_python("nope")


def test_a_second_interpreter_that_cannot_run_the_worker_is_given_up_with_a_warning(tmp_path, caplog):
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    logistics = texts(IPC / "logistics00" / "domain.pddl", IPC / "logistics00" / "probLOGISTICS-10-0.pddl")
    translators = Translators(str(broken), pypy_after_s=0.0)  # started at once, so it dies before CPython answers
    try:
        with caplog.at_level(logging.WARNING):
            first = translators.translate(time.monotonic() + 30, **logistics)
            for _ in range(20):  # its death may be seen after CPython's answer: the next calls see it
                if translators.python is None:
                    break
                translators.translate(time.monotonic() + 30, **logistics)
        assert first.translator == "cpython" and first.value["sas"].startswith("begin_version")
        assert translators.python is None and translators.second is None
        assert "died before it ever answered; using CPython only" in caplog.text
    finally:
        translators.close()


@needs_pypy
@pytest.mark.serial
def test_a_pypy_worker_stopped_at_its_deadline_answers_and_stays_warm_and_idle():
    parking = texts(IPC / "parking-sat11-strips" / "domain.pddl", hardest_parking())  # ~10 s to translate
    env = worker_env()
    worker = WorkerProcess(preload=translate.PRELOAD, python=PYPY, env=env, abort_grace_s=0.5)
    try:
        worker.call("ping", time.monotonic() + 30)
        pid = worker.pid
        for budget in (0.3, 1.5):
            started = time.monotonic()
            with pytest.raises(BudgetExpired):
                worker.call(translate.TRANSLATE_OP, time.monotonic() + budget, **parking)
            assert time.monotonic() - started < budget + 0.1  # the caller is not kept waiting for the abort
            worker.call("ping", time.monotonic() + 5)
        assert worker.pid == pid and (worker.aborts, worker.kills) == (2, 0)
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
        wait_until(lambda: not running(), 5, "all idle")
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


def test_the_cli_refuses_a_translator_python_that_does_not_exist(capsys):
    from portfolio.cli import main

    blocks = [str(IPC / "blocks" / "domain.pddl"), str(IPC / "blocks" / "probBLOCKS-4-0.pddl")]
    assert main(["plan", *blocks, "--translator-python", "no-such-python"]) == 2
    assert "--translator-python 'no-such-python': no such executable" in capsys.readouterr().err
    assert main(["serve", "--translator-python", "no-such-python"]) == 2
    assert "--translator-python 'no-such-python': no such executable" in capsys.readouterr().err


@needs_pypy
def test_warm_up_starts_the_pypy_worker_and_translates_the_bundled_tasks_before_the_first_call():
    from portfolio.delegates.fast_downward.translators import WARM_UP

    translators = Translators(PYPY)
    try:
        assert translators.second is None  # nothing started before it is asked for
        translators.warm_up()
        translators.wait_warm()
        assert translators.second is not None and translators.second.answered == len(WARM_UP)  # each answered
    finally:
        translators.close()


@needs_pypy
def test_cpython_out_of_memory_ends_the_race_at_once_and_keeps_pypy(monkeypatch):
    """CPython's answer is the reference, memory included: CI once saw the race wait 60 s for a PyPy thrashing
    under the same 150 MB cap after CPython had run out of memory, and then give PyPy up for good."""
    from test_service_helpers import BOOM_DOMAIN, boom_problem

    from portfolio.engine.workers import OutOfMemory

    monkeypatch.setenv("PORTFOLIO_MEMORY_LIMIT_MB", "150")  # both workers' caps (`portfolio.engine.limits`)
    translators = Translators(PYPY, pypy_after_s=0.0)
    try:
        # OutOfMemory at once, not BudgetExpired: the race does not wait on for PyPy after CPython ran out
        with pytest.raises(OutOfMemory):
            translators.translate(time.monotonic() + 15, domain_pddl=BOOM_DOMAIN, problem_pddl=boom_problem())
        assert translators.python == PYPY and translators.second is not None  # it ran; its task was too big
    finally:
        translators.close()


def test_the_pypy_worker_gets_a_fixed_nursery_unless_the_user_set_one(monkeypatch):
    """PyPy sizes its nursery from the CPU's last-level cache (240 MB on a VM reporting a 480 MB L3): fixed, so
    the second translator behaves the same on every machine; a user's own PYPY_GC_NURSERY is kept."""
    monkeypatch.delenv("PYPY_GC_NURSERY", raising=False)
    assert worker_env()["PYPY_GC_NURSERY"] == PYPY_NURSERY
    monkeypatch.setenv("PYPY_GC_NURSERY", "32MB")
    assert "PYPY_GC_NURSERY" not in worker_env()  # inherited from the user's environment as it is


@needs_pypy
def test_a_pypy_worker_starts_and_translates_under_a_small_memory_cap(monkeypatch):
    """On a machine reporting a 480 MB L3 cache PyPy's own nursery did not fit a 300 MB address-space cap ("cannot
    allocate nursery"): the worker died before its first answer and the race gave PyPy up for good."""
    monkeypatch.delenv("PYPY_GC_NURSERY", raising=False)
    monkeypatch.setenv("PORTFOLIO_MEMORY_LIMIT_MB", "200")  # every worker's cap (`portfolio.engine.limits`)
    blocks = texts(IPC / "blocks" / "domain.pddl", IPC / "blocks" / "probBLOCKS-4-0.pddl")
    worker = WorkerProcess(preload=translate.PRELOAD, python=PYPY, env=worker_env())
    try:
        answer = worker.call(translate.TRANSLATE_OP, time.monotonic() + 30, **blocks)
        assert answer["sas"] == translate.translate(blocks["domain_pddl"], blocks["problem_pddl"]).sas
    finally:
        worker.close()
