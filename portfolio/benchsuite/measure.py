"""The latency and coverage tables of `portfolio bench latency`: the warm `Planner` side by side with the raw
Fast Downward driver.

The driver (`fast-downward.py --alias lama-first`, shipped in the up-fast-downward wheel) is the baseline: it pays
interpreter start-up, imports and translation on every call. Each function here measures the warm `Planner` and
the driver on the same instances in the same run, so the ratios are not thrown off by a busy machine. The
instances come from `suites` (`latency_instances`, `benchmark_pairs`), the driver runs from `planners`
(`solve_with_driver`, the same process handling as `bench run`'s `driver:ALIAS` planners).
"""

from __future__ import annotations

import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from domains.load import load_task
from domains.model import Task
from domains.validate import apply, validate_plan
from portfolio.benchsuite.planners import solve_with_driver
from portfolio.benchsuite.suites import benchmark_pairs, latency_instances

log = logging.getLogger(__name__)


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
    from portfolio.delegates.registry import CLASSICAL_ONLY
    from portfolio.planner import Planner

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
                    fast_downward.forget_translations()
                    assert planner.plan(task).solved

                first = median_seconds(first_plan, rounds)
                state = changed_state(task, planner.plan(task).actions())
                replan = median_seconds(lambda: planner.plan(task, init=state), rounds)

                def driver_run() -> None:
                    assert solve_with_driver(domain_path, problem_path)[0], f"the driver failed on {problem_path}"

                driver = median_seconds(driver_run, rounds)
                rows.append(LatencyRow(f"{domain}/{problem}", driver * 1000, first * 1000, replan * 1000))
                log.info(
                    "%s: driver %.1f ms, first %.1f ms, replan %.1f ms",
                    rows[-1].instance,
                    rows[-1].driver_ms,
                    rows[-1].first_plan_ms,
                    rows[-1].replan_ms,
                )
    return rows


def cold_start(ipc: Path, rounds: int = 5) -> float:
    """Median wall seconds of `portfolio plan` in a new process on the first latency instance (blocks/
    probBLOCKS-4-0 under an IPC folder)."""
    base, instances = latency_instances(ipc)
    domain, problems = next(iter(instances.items()))
    command = [
        sys.executable,
        "-m",
        "portfolio.cli",
        "plan",
        str(base / domain / "domain.pddl"),
        str(base / domain / problems[0]),
    ]
    return median_seconds(lambda: subprocess.run(command, stdout=subprocess.DEVNULL, check=True), rounds)


@dataclass
class CoverageRow:
    domain: str
    tasks: int
    planner: int
    driver: int
    invalid: int = 0  # planner plans the validator rejected (not counted as solved)
    late: int = 0  # valid planner plans returned after the budget (not counted as solved, as the driver is killed)


def coverage(
    ipc: Path, per_domain: int = 10, budget_s: float = 1.0, domains: Iterable[str] | None = None
) -> list[CoverageRow]:
    """Tasks solved within `budget_s` by the warm Planner (classical tier) and by the raw driver (its whole
    run, start-up included, killed at the budget): the `per_domain` smallest problems of each domain of a
    benchmark folder, or the pairs of a `pairs.txt` (see `suites.benchmark_pairs`)."""
    from portfolio.delegates.registry import CLASSICAL_ONLY
    from portfolio.planner import Planner

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
                theirs += solve_with_driver(domain, problem, timeout=budget_s)[0]
            rows.append(CoverageRow(label, len(pairs), ours, theirs, invalid, late))
            log.info("%s: planner %d, driver %d of %d", label, ours, theirs, len(pairs))
    return rows
