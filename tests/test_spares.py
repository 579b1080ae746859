"""`portfolio.engine.spares`: `portfolio plan` starts its translator worker before it imports the planner; the
planner's `WorkerProcess` takes that very process, one started under another environment is not handed out, and
whatever is not taken dies before the CLI returns (bad input and --help included)."""

from __future__ import annotations

import time

import pytest
from support import REPO, descendants

from portfolio.cli import main
from portfolio.delegates.fast_downward.translate import PRELOAD, TRANSLATE_OP
from portfolio.engine import spares
from portfolio.engine.workers import WorkerProcess

BLOCKS = REPO / "tests" / "data" / "ipc" / "blocks"


@pytest.fixture(autouse=True)
def no_spares_left():
    yield
    spares.discard()


@pytest.fixture
def others() -> set[int]:
    """The processes this test process had before the test (workers earlier tests left in the same process)."""
    return set(descendants())


def started(before: set[int]) -> set[int]:
    """This process's descendants that were not there `before`."""
    return set(descendants()) - before


def test_the_worker_takes_the_spare_started_for_it(others):
    spares.prespawn(PRELOAD)
    [spare] = started(others)
    worker = WorkerProcess(preload=PRELOAD)
    try:
        assert worker.pid == spare
        answer = worker.call(
            TRANSLATE_OP,
            time.monotonic() + 60,
            domain_pddl=(BLOCKS / "domain.pddl").read_text(),
            problem_pddl=(BLOCKS / "probBLOCKS-4-0.pddl").read_text(),
        )
        assert "begin_operator" in answer["sas"] and worker.pid == spare  # it translates, in that process
    finally:
        worker.close()
    assert started(others) == set()


def test_a_spare_of_another_environment_or_command_is_not_taken(others, monkeypatch):
    spares.prespawn(PRELOAD)
    [spare] = started(others)
    monkeypatch.setenv("PORTFOLIO_SPARE_TEST", "1")  # the environment changed since the spare started
    worker = WorkerProcess(preload=PRELOAD)  # another environment: its own process; the spare is killed
    try:
        assert worker.pid != spare and spare not in started(others)
    finally:
        worker.close()
    spares.prespawn(PRELOAD)
    worker = WorkerProcess(preload=PRELOAD[:1])  # another command line: the spare stays one until discarded
    try:
        assert worker.pid not in spares_pids() and len(spares_pids()) == 1
    finally:
        worker.close()
    spares.discard()
    assert started(others) == set()


def spares_pids() -> list[int]:
    return [process.pid for _, process in spares._spares.values()]


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", str(BLOCKS / "domain.pddl")],  # bad input: no problem file
        ["plan", str(BLOCKS / "domain.pddl"), str(BLOCKS / "probBLOCKS-4-0.pddl"), "--delegates", "pyperplan"],
        ["plan", str(BLOCKS / "domain.pddl"), str(BLOCKS / "probBLOCKS-4-0.pddl"), "--no-cache"],
    ],
    ids=["bad-input", "no-fast-downward", "solved"],
)
def test_the_cli_leaves_no_worker_behind(argv, capsys, others):
    code = main(argv)
    capsys.readouterr()
    assert code == (2 if len(argv) == 2 else 0)
    assert started(others) == set() and spares._spares == {}


def test_help_leaves_no_worker_behind(capsys, others):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    capsys.readouterr()
    assert started(others) == set() and spares._spares == {}
