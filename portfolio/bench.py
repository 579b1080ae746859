"""Latency and coverage measurements side by side with the raw Fast Downward driver.

The driver (`fast-downward.py --alias lama-first`, shipped in the up-fast-downward wheel) is the baseline: it pays
interpreter start-up, imports and translation on every call. Each function here measures the warm `Planner` and
the driver on the same instances in the same run, so the ratios are not thrown off by a busy machine.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from domains.load import load_task
from domains.model import Task
from domains.validate import apply, validate_plan

log = logging.getLogger(__name__)

LATENCY_INSTANCES = {
    "blocks": ["probBLOCKS-4-0.pddl", "probBLOCKS-5-0.pddl", "probBLOCKS-6-0.pddl"],
    "gripper": ["prob01.pddl", "prob02.pddl"],
    "logistics00": ["probLOGISTICS-4-0.pddl", "probLOGISTICS-5-0.pddl"],
    "miconic": ["s1-0.pddl", "s2-0.pddl", "s3-0.pddl"],
}


def latency_instances(ipc: Path) -> tuple[Path, dict[str, list[str]]]:
    """(base folder, domain -> problem files) to time: `LATENCY_INSTANCES` under an IPC folder, or, for one
    domain folder (`../shared/ipc/blocks`, as `bench run` takes), that domain's latency instances, else its two
    smallest problems."""
    ipc = Path(ipc)
    if not (ipc / "domain.pddl").exists():
        return ipc, LATENCY_INSTANCES
    problems = LATENCY_INSTANCES.get(ipc.name) or [
        p.name for p in sorted((p for p in ipc.glob("*.pddl") if p.name != "domain.pddl"),
                               key=lambda p: (p.stat().st_size, p.name))[:2]]
    return ipc.parent, {ipc.name: problems}


def driver_script() -> Path:
    spec = importlib.util.find_spec("up_fast_downward")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0]) / "downward" / "fast-downward.py"


def run_driver(domain: Path, problem: Path, timeout: float | None = None) -> tuple[bool, float]:
    """One raw driver run in a fresh directory: (solved, wall seconds). Killed at `timeout` with its children."""
    workdir = tempfile.mkdtemp(prefix="portfolio-driver-")
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(driver_script()), "--alias", "lama-first", str(Path(domain).resolve()),
         str(Path(problem).resolve())],
        cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        process.wait(timeout=timeout)
        solved = process.returncode == 0 and (Path(workdir) / "sas_plan").exists()
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        solved = False
    elapsed = time.monotonic() - start
    shutil.rmtree(workdir, ignore_errors=True)
    return solved, elapsed


def driver_translate(domain: Path, problem: Path, timeout: float | None = None) -> str | None:
    """The SAS text the raw driver's translator writes (`fast-downward.py --translate`), or None when it failed
    or ran out of time."""
    workdir = tempfile.mkdtemp(prefix="portfolio-driver-")
    try:
        process = subprocess.run(
            [sys.executable, str(driver_script()), "--translate", str(Path(domain).resolve()),
             str(Path(problem).resolve())],
            cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
        )
        output = Path(workdir) / "output.sas"
        return output.read_text() if process.returncode == 0 and output.exists() else None
    except subprocess.TimeoutExpired:
        return None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def benchmark_pairs(source: Path, per_domain: int | None = None) -> list[tuple[str, Path, Path]]:
    """(domain label, domain file, problem file) triples from a benchmark folder or a `pairs.txt`.

    A folder holds one sub-folder per domain with a `domain.pddl` and problem files: the `per_domain` smallest
    problems (by file size, then name) are taken. A `pairs.txt` lists `DOMAIN PROBLEM` paths relative to its own
    folder, one pair a line (domains with one domain file per problem need it); the first `per_domain` pairs of
    each domain folder are taken, in file order."""
    source = Path(source)
    triples: list[tuple[str, Path, Path]] = []
    if source.is_file():
        from portfolio.benchsuite.suites import read_pairs  # the one pairs.txt reader (file:line errors)

        counts: dict[str, int] = {}
        for domain, problem in read_pairs(source):
            label = problem.parent.name
            if per_domain is None or counts.get(label, 0) < per_domain:
                counts[label] = counts.get(label, 0) + 1
                triples.append((label, domain, problem))
        return triples
    folders = [source] if (source / "domain.pddl").exists() else sorted(
        p for p in source.iterdir() if (p / "domain.pddl").exists())  # one domain folder, or a folder of them
    for folder in folders:
        problems = sorted((p for p in folder.glob("*.pddl") if p.name != "domain.pddl"),
                          key=lambda p: (p.stat().st_size, p.name))[:per_domain]
        triples.extend((folder.name, folder / "domain.pddl", problem) for problem in problems)
    return triples


def median_seconds(call: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def changed_state(task: Task, plan) -> frozenset:
    """The state halfway through `plan`: a realistic 'the world moved on, plan again' starting point."""
    state = task.problem.init
    for step in plan[: max(1, len(plan) // 2)]:
        state = apply(task, state, step)
    return state


@dataclass
class LatencyRow:
    instance: str
    driver_ms: float
    first_plan_ms: float
    replan_ms: float

    @property
    def first_ratio(self) -> float:
        return self.first_plan_ms / self.driver_ms

    @property
    def replan_ratio(self) -> float:
        return self.replan_ms / self.first_plan_ms


def latency(ipc: Path, rounds: int = 7, instances: dict[str, list[str]] | None = None) -> list[LatencyRow]:
    """Median of `rounds` for: the raw driver; the warm Planner's first plan of the task (translation cache
    emptied before each round); a replan of that task from a changed state (translation re-used)."""
    from portfolio.planner import CLASSICAL_ONLY, Planner

    rows = []
    if instances is None:
        ipc, instances = latency_instances(ipc)
    with Planner(CLASSICAL_ONLY) as planner:
        fast_downward = planner.fast_downward
        assert fast_downward is not None
        for domain, problems in instances.items():
            for problem in problems:
                domain_path, problem_path = ipc / domain / "domain.pddl", ipc / domain / problem
                task = load_task(domain_path, problem_path)
                planner.plan(task)  # warm the workers on this domain once

                def first_plan() -> None:
                    fast_downward._translations.clear()
                    assert planner.plan(task).solved

                first = median_seconds(first_plan, rounds)
                state = changed_state(task, planner.plan(task).actions())
                replan = median_seconds(lambda: planner.plan(task, init=state), rounds)
                def driver_run() -> None:
                    assert run_driver(domain_path, problem_path)[0], f"the driver failed on {problem_path}"

                driver = median_seconds(driver_run, rounds)
                rows.append(LatencyRow(f"{domain}/{problem}", driver * 1000, first * 1000, replan * 1000))
                log.info("%s: driver %.1f ms, first %.1f ms, replan %.1f ms", rows[-1].instance,
                         rows[-1].driver_ms, rows[-1].first_plan_ms, rows[-1].replan_ms)
    return rows


def cold_start(ipc: Path, rounds: int = 5) -> float:
    """Median wall seconds of `portfolio plan` in a new process on the first latency instance (blocks/
    probBLOCKS-4-0 under an IPC folder)."""
    base, instances = latency_instances(ipc)
    domain, problems = next(iter(instances.items()))
    command = [sys.executable, "-m", "portfolio.cli", "plan", str(base / domain / "domain.pddl"),
               str(base / domain / problems[0])]
    return median_seconds(lambda: subprocess.run(command, stdout=subprocess.DEVNULL, check=True), rounds)


@dataclass
class CoverageRow:
    domain: str
    tasks: int
    planner: int
    driver: int
    invalid: int = 0  # planner plans the validator rejected (not counted as solved)
    late: int = 0  # valid planner plans returned after the budget (not counted as solved, as the driver is killed)


def coverage(ipc: Path, per_domain: int = 10, budget_s: float = 1.0,
             domains: Iterable[str] | None = None) -> list[CoverageRow]:
    """Tasks solved within `budget_s` by the warm Planner (classical tier) and by the raw driver (its whole
    run, start-up included, killed at the budget): the `per_domain` smallest problems of each domain of a
    benchmark folder, or the pairs of a `pairs.txt` (see `benchmark_pairs`)."""
    from portfolio.planner import CLASSICAL_ONLY, Planner

    wanted = set(domains) if domains is not None else None
    by_domain: dict[str, list[tuple[Path, Path]]] = {}
    for label, domain, problem in benchmark_pairs(ipc, per_domain):
        if wanted is None or label in wanted:
            by_domain.setdefault(label, []).append((domain, problem))
    rows = []
    with Planner(CLASSICAL_ONLY, budget_s=budget_s) as planner:
        for label, pairs in by_domain.items():
            ours = theirs = invalid = late = 0
            for domain, problem in pairs:
                task = load_task(domain, problem)
                start = time.monotonic()
                result = planner.plan(task)
                in_time = time.monotonic() - start <= budget_s
                if result.solved:
                    valid = validate_plan(task, result.actions()).ok
                    ours += valid and in_time
                    invalid += not valid
                    late += valid and not in_time
                theirs += run_driver(domain, problem, timeout=budget_s)[0]
            rows.append(CoverageRow(label, len(pairs), ours, theirs, invalid, late))
            log.info("%s: planner %d, driver %d of %d", label, ours, theirs, len(pairs))
    return rows
