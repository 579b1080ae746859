"""Warm Planner vs the raw Fast Downward driver, on the same instances in the same run (pytest-benchmark).

Run with `make bench`. Each instance gets three timings: the raw driver (`fast-downward.py --alias lama-first`),
the warm Planner's first plan of the task (translation cache emptied every round), and a replan from a changed
state. `extra_info` carries the instance so the JSON report can be turned into ratios; `portfolio bench`
prints the ratios directly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from domains.load import load_task
from portfolio.benchsuite.measure import changed_state
from portfolio.benchsuite.planners import solve_with_driver
from portfolio.benchsuite.suites import LATENCY_INSTANCES
from portfolio.delegates.registry import CLASSICAL_ONLY
from portfolio.planner import Planner

IPC = Path(__file__).resolve().parents[1].parent / "shared" / "ipc"
CASES = [(d, p) for d, problems in LATENCY_INSTANCES.items() for p in problems]


@pytest.fixture(scope="module")
def planner():
    with Planner(CLASSICAL_ONLY) as warm:
        yield warm


@pytest.mark.parametrize("domain, problem", CASES)
def test_raw_driver(benchmark, domain, problem):
    benchmark.extra_info["instance"] = f"{domain}/{problem}"
    solved, _ = benchmark.pedantic(
        solve_with_driver, args=(IPC / domain / "domain.pddl", IPC / domain / problem), rounds=5, iterations=1
    )
    assert solved


@pytest.mark.parametrize("domain, problem", CASES)
def test_warm_first_plan(benchmark, planner, domain, problem):
    task = load_task(IPC / domain / "domain.pddl", IPC / domain / problem)
    planner.plan(task)
    fast_downward = planner.fast_downward

    def first_plan():
        fast_downward.forget_translations()
        return planner.plan(task)

    benchmark.extra_info["instance"] = f"{domain}/{problem}"
    assert benchmark.pedantic(first_plan, rounds=7, iterations=1).solved


@pytest.mark.parametrize("domain, problem", CASES)
def test_replan_from_changed_state(benchmark, planner, domain, problem):
    task = load_task(IPC / domain / "domain.pddl", IPC / domain / problem)
    state = changed_state(task, planner.plan(task).actions())
    benchmark.extra_info["instance"] = f"{domain}/{problem}"
    result = benchmark.pedantic(lambda: planner.plan(task, init=state), rounds=7, iterations=1)
    assert result.solved and result.attempts[-1].details["translation_reused"]
