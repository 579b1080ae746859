"""Running an experiment: every (task, planner, repeat) once, each in its own process, results appended to one file.

Isolation. A run is a fresh `python -m portfolio.benchsuite.child` in its own session and process group. The
runner gives it `setup_timeout_s` to get ready (imports, a warm planner), then its hard budget (the planner's
budget plus `KILL_MARGIN_S`): past that the whole group gets SIGKILL and the run is a timeout. After every run
the group is killed anyway, so nothing a planner left behind outlives its run. Peak memory is `ru_maxrss` from
`os.wait4` on the run's process: the process and every descendant it waited for (translator, search).
A fresh interpreter costs ~0.3 s per run (measured: imports of the planner and the parser); forking a warm
process would be cheaper but is unsafe in a multi-threaded Dask worker, and a fresh process is what makes
runs independent of each other.

Order. Runs are interleaved (`order.interleaved`): repeat-major, then task, then planner, so the planners of one
task run back to back (in parallel on a pool of two they run side by side) and the load of a shared machine hits
them alike.

Where. Locally, `jobs` runs at a time (default: the number of cores), each run a process started by one of
`jobs` threads: the run processes are the pool. With `dask_address`, every run is a task on an existing Dask
cluster (`execute` runs on a worker and starts the run's process there); the client writes the same records to
the same file. The results file is written only here, by one writer, so resuming is the same either way.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from portfolio.benchsuite.child import PARENT_ENV
from portfolio.benchsuite.order import interleaved
from portfolio.benchsuite.planners import hard_budget_s
from portfolio.benchsuite.store import ResultsError, RunLog, read_runs, runs_path
from portfolio.benchsuite.suites import TaskSpec

log = logging.getLogger(__name__)

KILL_MARGIN_S = 1.0  # past the planner's budget before its process group is killed (stopping takes time)
SETUP_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 30.0  # to reach a Dask scheduler
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class RunSpec(BaseModel, frozen=True):
    run_id: str
    planner: str
    task: TaskSpec
    repeat: int = 0
    budget_s: float = 1.0
    decomposer_budget_s: float = 30.0
    setup_timeout_s: float = SETUP_TIMEOUT_S


def run_id(planner: str, task_id: str, repeat: int) -> str:
    return f"{planner}|{task_id}|{repeat}"


def plan_runs(
    tasks: Iterable[TaskSpec],
    planners: list[str],
    repeat: int = 1,
    budget_s: float = 1.0,
    decomposer_budget_s: float = 30.0,
    setup_timeout_s: float = SETUP_TIMEOUT_S,
) -> list[RunSpec]:
    """Every run of the experiment, interleaved across planners (see the module docstring)."""
    return [
        RunSpec(
            run_id=run_id(planner, task.id, r),
            planner=planner,
            task=task,
            repeat=r,
            budget_s=budget_s,
            decomposer_budget_s=decomposer_budget_s,
            setup_timeout_s=setup_timeout_s,
        )
        for r, task, order in interleaved(tasks, planners, repeat)
        for planner in order
    ]


def pending_runs(specs: list[RunSpec], out_dir: Path) -> list[RunSpec]:
    """The runs not yet in the results file (resume). A run recorded under another budget is not the same
    run: that is a `ResultsError` (use another folder), not a silent skip."""
    recorded = {r["run_id"]: r.get("budget_s") for r in read_runs(runs_path(out_dir))}
    for spec in specs:
        budget = recorded.get(spec.run_id, spec.budget_s)
        if budget != spec.budget_s:
            raise ResultsError(
                f"{spec.run_id} was run with --budget {budget} here, not {spec.budget_s}; "
                "give another --out for another budget",
                file=str(runs_path(out_dir)),
            )
    return [spec for spec in specs if spec.run_id not in recorded]


# -- one run ---------------------------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env[PARENT_ENV] = str(os.getpid())
    return env


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_messages(process: subprocess.Popen, spec: RunSpec, started: float) -> tuple[dict | None, float | None, bool]:
    """Read the child's channel until it closes or a deadline passes: (result, ready time, killed)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = started + spec.setup_timeout_s
    ready_at: float | None = None
    result: dict | None = None
    buffer = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill_group(process.pid)
            return result, ready_at, True
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return result, ready_at, False
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("ready") and ready_at is None:
                ready_at = time.monotonic()
                deadline = (
                    ready_at + hard_budget_s(spec.planner, spec.budget_s, spec.decomposer_budget_s) + KILL_MARGIN_S
                )
            if "result" in message:
                result = message["result"]


def execute(spec: RunSpec | dict) -> dict[str, Any]:
    """Run one planner on one task in a process of its own; the record that goes into the results file."""
    spec = RunSpec.model_validate(spec)
    workdir = Path(tempfile.mkdtemp(prefix="portfolio-bench-"))
    payload = spec.model_dump(mode="json") | {"workdir": str(workdir)}
    started = time.monotonic()
    with open(workdir / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "portfolio.benchsuite.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=workdir,
            env=_child_env(),
            start_new_session=True,
        )
        try:
            assert process.stdin is not None
            try:
                process.stdin.write(json.dumps(payload).encode())
                process.stdin.close()
            except BrokenPipeError:  # it died at start-up; its stderr says why
                pass
            result, ready_at, killed = _read_messages(process, spec, started)
            ended = time.monotonic()
        finally:
            _kill_group(process.pid)  # whatever the run left behind in its group, before reaping its leader
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            process.stdout.close()  # type: ignore[union-attr]
    wall = time.monotonic() - started
    # peak_mem_kb: the planner's own (`child.TreeMemory`, in the result); the whole run's process when it died
    record = base_record(spec) | {"wall_s": round(wall, 6), "peak_mem_kb": usage.ru_maxrss, "pid": process.pid}
    if result is not None:
        record.update(result)
    elif killed and ready_at is not None:
        record.update(status="timeout", time_s=round(ended - ready_at, 6), reason="killed at the hard budget")
    else:
        tail = (workdir / "stderr.txt").read_text(errors="replace").strip().splitlines()[-3:]
        why = f"set-up took over {spec.setup_timeout_s} s" if killed else f"exit code {process.returncode}"
        record.update(status="error", reason=f"run process failed ({why}): {' | '.join(tail)}")
    shutil.rmtree(workdir, ignore_errors=True)
    return record


def base_record(spec: RunSpec) -> dict[str, Any]:
    return {
        "run_id": spec.run_id,
        "planner": spec.planner,
        "task": spec.task.id,
        "domain": spec.task.domain,
        "repeat": spec.repeat,
        "budget_s": spec.budget_s,
        "host": socket.gethostname(),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
    }


# -- many runs ---------------------------------------------------------------------------------------------------


def local_results(specs: list[RunSpec], jobs: int) -> Iterator[dict[str, Any]]:
    """Records as runs finish, `jobs` at a time, started in the given order."""
    executor = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="bench-run")
    try:
        futures = [executor.submit(execute, spec) for spec in specs]
        for future in as_completed(futures):
            yield future.result()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def dask_results(specs: list[RunSpec], address: str) -> Iterator[dict[str, Any]]:
    """Records as runs finish on the Dask cluster at `address`, submitted in the given order (as priorities)."""
    from distributed import Client
    from distributed import as_completed as dask_completed

    with Client(address, timeout=CONNECT_TIMEOUT_S) as client:
        futures = [
            client.submit(
                execute,
                spec.model_dump(mode="json"),
                pure=False,
                priority=len(specs) - index,
                key=f"bench-{index}-{os.urandom(4).hex()}",
            )
            for index, spec in enumerate(specs)
        ]
        try:
            for future in dask_completed(futures):
                try:
                    yield future.result()
                except Exception as error:  # a worker died under the run: not recorded, so resume reruns it
                    log.warning("a run failed on the cluster and was not recorded: %s", error)
        finally:
            client.cancel(futures)


def run_experiment(
    specs: list[RunSpec], out_dir: Path, jobs: int | None = None, dask_address: str | None = None, progress: bool = True
) -> dict[str, int]:
    """Run what is not yet in `out_dir`'s results file; {"total", "skipped", "ran", "solved"}."""
    from tqdm import tqdm

    pending = pending_runs(specs, out_dir)
    counts = {"total": len(specs), "skipped": len(specs) - len(pending), "ran": 0, "solved": 0}
    if not pending:
        return counts
    results = (
        dask_results(pending, dask_address) if dask_address else local_results(pending, jobs or os.cpu_count() or 1)
    )
    with (
        RunLog(runs_path(out_dir)) as run_log,
        tqdm(total=len(pending), unit="run", desc="bench", disable=not progress, dynamic_ncols=True) as bar,
    ):
        for record in results:
            run_log.append(record)
            counts["ran"] += 1
            counts["solved"] += record.get("status") == "solved" and record.get("valid") is not False
            bar.set_postfix(solved=counts["solved"], refresh=False)
            bar.update()
    return counts
