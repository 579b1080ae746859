"""`portfolio bench run`: real runs in their own processes, hard budgets, and resuming after a kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter

import pytest
from support import IPC, REPO, poll, wait_gone

from benchmarks.bench_resume import bench_run_command
from portfolio.benchsuite import runner, suites
from portfolio.benchsuite.order import interleaved
from portfolio.benchsuite.store import RunLog, read_runs, runs_path


def test_runs_record_validated_properties(tmp_path):
    tasks = suites.read_suites(["gen:logistics:sizes=2..3", "typed:research"])
    specs = runner.plan_runs(tasks, ["typed-search", "classical", "driver:lama-first"], budget_s=5.0)
    counts = runner.run_experiment(specs, tmp_path, jobs=2, progress=False)
    assert counts == {"total": 9, "skipped": 0, "ran": 9, "solved": 9}
    records = read_runs(runs_path(tmp_path))
    assert sorted(r["run_id"] for r in records) == sorted(s.run_id for s in specs)
    for record in records:
        assert record["status"] == "solved" and record["valid"] is True, record
        assert record["plan_length"] > 0 and record["plan_cost"] > 0
        assert 0 < record["time_s"] < record["wall_s"]  # peak_mem_kb: per planner, below
    driver = [r for r in records if r["planner"] == "driver:lama-first"]
    # the planner's memory, not the run process's interpreter and imports (50-150 MB whatever the planner)
    assert all(r["peak_mem_kb"] > 1_000 for r in driver), driver  # its translator's and search's own
    typed = [r for r in records if r["planner"] == "typed-search"]
    assert all(r["peak_mem_kb"] < 10_000 for r in typed), typed  # a small search adds well under 10 MB
    assert all(r["translate_s"] is not None and r["search_s"] is not None for r in driver)
    classical = [r for r in records if r["planner"] == "classical" and r["domain"] == "gen-logistics"]
    assert all(r["translate_s"] is not None and r["setup_s"] > 0 for r in classical)


def test_runs_are_interleaved_across_planners():
    tasks = suites.read_suite("gen:gripper:sizes=1..2")
    specs = runner.plan_runs(tasks, ["a", "b"], repeat=2)
    assert [(s.repeat, s.task.size, s.planner) for s in specs] == [
        (0, 1, "a"),
        (0, 1, "b"),
        (0, 2, "a"),
        (0, 2, "b"),
        (1, 1, "a"),
        (1, 1, "b"),
        (1, 2, "a"),
        (1, 2, "b"),
    ]


def test_interleaved_is_repeat_major_then_task_then_arm():
    """Every arm of a task back to back, every task of a repeat before the next repeat; a generator of tasks is
    read once (the second repeat still sees every task)."""
    order = [(r, t, arm) for r, t, arms in interleaved((t for t in "xy"), ["a", "b"], 2) for arm in arms]
    assert order == [
        (0, "x", "a"), (0, "x", "b"), (0, "y", "a"), (0, "y", "b"),
        (1, "x", "a"), (1, "x", "b"), (1, "y", "a"), (1, "y", "b"),
    ]  # fmt: skip
    assert list(interleaved([], ["a"], 3)) == [] and list(interleaved("x", ["a"], 0)) == []


def test_interleaved_rotates_the_arm_that_goes_first_across_tasks_and_repeats():
    """With `rotate`, the k-th (repeat, task) starts with arm k mod n, so each arm goes first equally often;
    no arms is no arms, not a division by zero."""
    orders = [arms for _, _, arms in interleaved("xy", ["a", "b", "c"], 2, rotate=True)]
    assert orders == [("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b"), ("a", "b", "c")]
    assert [arms for _, _, arms in interleaved("x", [], rotate=True)] == [()]


@pytest.mark.serial  # asserts when the hard budget's kill came
def test_a_planner_that_ignores_its_budget_is_killed_with_its_process_group(monkeypatch):
    """unified-planning's pyperplan ignores timeouts (FIELD-NOTES): the run's process group is killed at the
    budget plus the margin, and nothing it started survives."""
    marker = f"PORTFOLIO_BENCH_TEST={uuid.uuid4().hex}"
    monkeypatch.setenv(*marker.split("="))
    # rovers p20: pyperplan ran past a 30 s budget on it (25 times the 1.2 s hard budget here), and
    # unified-planning reads it in about 2 s; p40 (minutes for pyperplan too) took about 9 s of parsing before the
    # run was even ready, time that tested nothing. (p10 is too easy: pyperplan solved it in 4 s.)
    task = next(t for t in suites.read_suite(str(IPC / "rovers")) if t.id == "rovers/p20.pddl")
    spec = runner.plan_runs([task], ["up:pyperplan"], budget_s=0.2)[0]
    started = time.monotonic()
    record = runner.execute(spec)
    assert record["status"] == "timeout" and record["reason"] == "killed at the hard budget", record
    assert 0.2 + runner.KILL_MARGIN_S <= record["time_s"] < 0.2 + runner.KILL_MARGIN_S + 1.0
    assert time.monotonic() - started < 30
    assert wait_gone(marker.split("=")[1], 5) == []


def test_a_run_that_cannot_start_in_time_is_an_error():
    spec = runner.plan_runs(suites.read_suite("gen:gripper:sizes=2"), ["classical"], setup_timeout_s=0.05)[0]
    record = runner.execute(spec)
    assert record["status"] == "error" and "set-up took over 0.05 s" in record["reason"]


def test_resume_skips_recorded_runs_and_reruns_a_torn_last_line(tmp_path):
    specs = runner.plan_runs(suites.read_suite("gen:blocksworld:sizes=1..3"), ["typed-search"])
    assert runner.run_experiment(specs[:2], tmp_path, jobs=1, progress=False)["ran"] == 2
    path = runs_path(tmp_path)
    first = path.read_text().splitlines()
    with open(path, "a") as handle:  # what a kill -9 in the middle of a write leaves
        handle.write(first[1][: len(first[1]) // 2])
    assert len(read_runs(path)) == 2
    counts = runner.run_experiment(specs, tmp_path, jobs=1, progress=False)
    assert counts == {"total": 3, "skipped": 2, "ran": 1, "solved": 1}
    lines = path.read_text().splitlines()
    assert lines[:2] == first and [json.loads(line)["run_id"] for line in lines] == [s.run_id for s in specs]


def test_resuming_with_another_budget_is_refused(tmp_path, capsys):
    from portfolio.cli import main

    argv = [
        "bench",
        "run",
        "gen:gripper:sizes=1",
        "--planners",
        "typed-search",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    assert main(argv + ["--budget", "2"]) == 2
    assert "was run with --budget 1.0 here, not 2.0" in capsys.readouterr().err


def test_a_corrupt_line_in_the_middle_is_an_error_not_a_lost_run(tmp_path):
    path = runs_path(tmp_path)
    with RunLog(path) as log:
        log.append({"run_id": "a"})
    path.write_text(path.read_text() + "garbage\n" + json.dumps({"run_id": "b"}) + "\n")
    from portfolio.benchsuite.store import ResultsError

    with pytest.raises(ResultsError, match=r"runs.jsonl:2: not a JSON record"):
        read_runs(path)


def test_kill_9_mid_experiment_then_resume_loses_and_repeats_nothing(tmp_path):
    """The runner is SIGKILLed after some runs are written; its run processes die with it; the same command
    again runs exactly the missing ones."""
    marker = uuid.uuid4().hex
    # 18 runs, killed once 8 are written: runs written before the kill and runs missing after it, as with the 30
    # runs (killed at 12) this took before; what is asserted (no run process left, exactly the missing ones run
    # again, none twice) does not depend on how many there are, and 12 fewer runs are about 5 s less.
    command = bench_run_command("gen:blocksworld:sizes=1..3:seeds=0..5", tmp_path, jobs=2)
    env = dict(os.environ, PYTHONPATH=str(REPO), PORTFOLIO_BENCH_TEST=marker)
    runner_process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    path = runs_path(tmp_path)
    poll(lambda: path.exists() and path.read_bytes().count(b"\n"), lambda lines: lines >= 8, 120, every=0.05)
    os.kill(runner_process.pid, signal.SIGKILL)
    runner_process.wait()
    assert wait_gone(marker) == [], "run processes outlived the killed runner"
    written = len(read_runs(path))
    assert 8 <= written < 18
    finished = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert f"{18 - written} runs done, {written} already in" in finished.stdout
    ids = Counter(r["run_id"] for r in read_runs(path))
    assert len(ids) == 18 and set(ids.values()) == {1}
