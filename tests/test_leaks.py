"""Nothing outlives a command: every CLI path, error paths included, closes the processes, threads and
temporary directories it started. Run in-process (so an unclosed object is still alive when we look: no
interpreter exit tidies up for it) and as a real process."""

from __future__ import annotations

import tempfile
import threading

import pytest
from support import IPC, descendants, poll, portfolio

from portfolio.cli import main

BLOCKS = (str(IPC / "blocks" / "domain.pddl"), str(IPC / "blocks" / "probBLOCKS-4-0.pddl"))


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """A temporary directory of our own, so other processes' `portfolio-fd-*` directories do not count."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.fixture
def bad_store(tmp_path):
    path = tmp_path / "not-a-database.db"
    path.write_text("this is not SQLite\n" * 100)
    return str(path)


def error_paths(bad_store: str, tmp_path) -> dict[str, list[str]]:
    empty_store = str(tmp_path / "empty.db")
    bad_task = tmp_path / "bad.json"
    bad_task.write_text("{")
    return {
        "llm without --llm-url": ["plan", *BLOCKS, "--delegates", "fast-downward,llm"],
        "unknown delegate": ["plan", *BLOCKS, "--delegates", "fast-downward,gpt"],
        "bad --shares": ["plan", *BLOCKS, "--shares", "fast-downward=-1"],
        "bad --traces": ["plan", *BLOCKS, "--traces", bad_store],
        "bad task file": ["plan", "--task", str(bad_task)],
        "costs with a bad store": ["costs", *BLOCKS, "--traces", bad_store],
        "costs without a model": ["costs", *BLOCKS, "--traces", empty_store],
    }


def snapshot() -> tuple[set[int], set[threading.Thread]]:
    """Processes and threads alive now (other tests' fixtures may keep warm planners for the session)."""
    return set(descendants()), {t for t in threading.enumerate() if t.name == "search-pool"}


def leftovers(root, before) -> tuple[list[str], list[int], list[str]]:
    """What was started since `before` and is still there: directories, child processes, pool threads."""

    def left() -> tuple[list[str], list[int], list[str]]:
        dirs = sorted(p.name for p in root.glob("portfolio-*"))
        children = sorted(set(descendants()) - before[0])
        threads = [t.name for t in threading.enumerate() if t.name == "search-pool" and t not in before[1]]
        return dirs, children, threads

    return poll(left, lambda found: not any(found), 5.0, every=0.05)  # killed processes take a moment to be reaped


@pytest.mark.parametrize(
    "case",
    [
        "llm without --llm-url",
        "unknown delegate",
        "bad --shares",
        "bad --traces",
        "bad task file",
        "costs with a bad store",
        "costs without a model",
    ],
)
def test_error_path_exits_2_and_leaves_nothing_behind(case, private_tmp, bad_store, capsys):
    before = snapshot()
    code = main(error_paths(bad_store, private_tmp)[case])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.startswith("portfolio: error:") and "Traceback" not in captured.err
    assert leftovers(private_tmp, before) == ([], [], [])


def test_a_solved_plan_leaves_nothing_behind(private_tmp, capsys):
    before = snapshot()
    assert main(["plan", *BLOCKS]) == 0
    assert leftovers(private_tmp, before) == ([], [], [])


def test_as_a_process_no_directory_survives_the_error_paths(private_tmp, bad_store):
    for args in error_paths(bad_store, private_tmp).values():
        run = portfolio(*args, timeout=60, env={"TMPDIR": str(private_tmp)})
        assert run.returncode == 2, run.stderr
    assert sorted(p.name for p in private_tmp.glob("portfolio-*")) == []
