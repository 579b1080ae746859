"""`portfolio bench run --dask`: the same records and the same coverage table as a local run, on a LocalCluster
and on a scheduler and a worker started as separate processes (`dask scheduler`, `dask worker`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support import IPC, REPO, wait_gone, wait_until

from portfolio.benchsuite import runner, suites
from portfolio.benchsuite.report import coverage
from portfolio.benchsuite.store import read_runs, runs_path
from portfolio.cli import main

distributed = pytest.importorskip("distributed")


UNSOLVABLE = """(define (problem two-block-cycle) (:domain blocks)
  (:objects a b) (:init (clear a) (clear b) (ontable a) (ontable b) (handempty))
  (:goal (and (on a b) (on b a))))
"""


def ipc_pairs(path: Path) -> Path:
    """Easy tasks of two IPC domains, and a blocks task with no plan (a miss for every planner, whatever the
    load: budgets are generous so the table does not depend on how busy the machine is). Each run is a process
    of its own: two domains were enough to compare the two runners (four took 32 s of a loaded suite)."""
    picked = [("gripper", "prob01.pddl"), ("logistics00", "probLOGISTICS-4-0.pddl")]
    lines = [f"{IPC / d / 'domain.pddl'} {IPC / d / p}\n" for d, p in picked]
    (path.parent / "blocks-cycle").mkdir()
    (path.parent / "blocks-cycle" / "cycle.pddl").write_text(UNSOLVABLE)
    lines.append(f"{IPC / 'blocks' / 'domain.pddl'} blocks-cycle/cycle.pddl\n")
    path.write_text("".join(lines))
    return path


def test_local_cluster_and_local_pool_give_the_same_coverage(tmp_path):
    specs = runner.plan_runs(
        suites.read_suite(str(ipc_pairs(tmp_path / "pairs.txt"))), ["classical", "driver:lama-first"], budget_s=20.0
    )
    runner.run_experiment(specs, tmp_path / "local", jobs=2, progress=False)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        runner.run_experiment(specs, tmp_path / "dask", dask_address=cluster.scheduler_address, progress=False)
    local, dask = (read_runs(runs_path(tmp_path / kind)) for kind in ("local", "dask"))
    assert sorted(r["run_id"] for r in local) == sorted(r["run_id"] for r in dask) == sorted(s.run_id for s in specs)
    assert coverage(local) == coverage(dask)
    table = coverage(dask)
    assert table["blocks-cycle"] == {"classical": (0, 1), "driver:lama-first": (0, 1)}
    assert {r["status"] for r in dask if r["domain"] == "blocks-cycle"} == {"unsolvable"}
    assert all(
        row == {"classical": (1, 1), "driver:lama-first": (1, 1)} for d, row in table.items() if d != "blocks-cycle"
    )
    assert all(r["valid"] for r in dask if r["status"] == "solved")


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def test_scheduler_and_worker_as_separate_processes(tmp_path, capsys):
    marker = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=str(REPO), PORTFOLIO_BENCH_TEST=marker)
    dask = str(Path(sys.executable).parent / "dask")
    scheduler_file = tmp_path / "scheduler.json"
    scheduler = _start(
        [
            dask,
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(scheduler_file),
        ],
        env,
    )
    worker = None
    try:
        wait_until(scheduler_file.exists, 60, "the scheduler's address file", every=0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        worker = _start(
            [
                dask,
                "worker",
                address,
                "--nthreads",
                "2",
                "--host",
                "127.0.0.1",
                "--no-dashboard",
                "--death-timeout",
                "60",
            ],
            env,
        )
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(1, timeout=60)
        suite = ["gen:gripper:sizes=1..2", "typed:research"]  # each run a process: 6 runs, not 10 (40 s loaded)
        common = ["--planners", "typed-search,classical", "--budget", "20", "--no-progress"]
        assert main(["bench", "run", *suite, *common, "--dask", address, "--out", str(tmp_path / "dask")]) == 0
        assert main(["bench", "run", *suite, *common, "--jobs", "2", "--out", str(tmp_path / "local")]) == 0
        out = capsys.readouterr().out
        assert out.count("6 runs done, 0 already in") == 2
        local, remote = (read_runs(runs_path(tmp_path / kind)) for kind in ("local", "dask"))
        assert coverage(local) == coverage(remote)
        assert coverage(remote)["gen-gripper"] == {"classical": (2, 2), "typed-search": (2, 2)}
    finally:
        for process in (worker, scheduler):
            if process is not None:
                _stop(process)
    assert wait_gone(marker, 15) == [], "a dask or run process was left behind"


def test_unreachable_scheduler_is_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "CONNECT_TIMEOUT_S", 2.0)
    argv = [
        "bench",
        "run",
        "gen:gripper:sizes=1",
        "--planners",
        "typed-search",
        "--no-progress",
        "--dask",
        "tcp://127.0.0.1:9",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 2
    assert "cannot use the Dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err
