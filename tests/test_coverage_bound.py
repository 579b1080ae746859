"""The coverage bound (`benchmarks/experiments/coverage_bound.py`) counts a task only when some translator arm's
translation plus some search fits the budget, and runs a search only on a translation that fit."""

from __future__ import annotations

from support import IPC

from benchmarks.experiments import coverage_bound
from portfolio.delegates.fast_downward import translate as translate_worker
from portfolio.engine.workers import WorkerProcess

BLOCKS = IPC / "blocks"


def test_a_task_counts_when_a_translation_and_a_search_fit_the_budget() -> None:
    worker = WorkerProcess(preload=translate_worker.PRELOAD)
    problem = BLOCKS / "probBLOCKS-4-0.pddl"
    try:
        row = coverage_bound.measure("blocks", BLOCKS / "domain.pddl", problem, worker, budget_s=1.0, timeout_s=3.0)
        nothing_fits = coverage_bound.measure(
            "blocks", BLOCKS / "domain.pddl", problem, worker, budget_s=0.0, timeout_s=3.0
        )
    finally:
        worker.close()
    assert set(row.translate_s) == {"cpython", "cpython-skip"}  # every arm translated it
    assert row.within(1.0) and row.best is not None and row.best[1].split("/")[0] in row.translate_s
    assert row.best[0] == min(
        row.translate_s[key.split("/")[0]] + seconds  # type: ignore[operator]
        for key, seconds in row.search_s.items()
        if seconds is not None
    )
    assert not nothing_fits.within(0.0) and nothing_fits.best is None
    assert nothing_fits.search_s == {}  # no translation fits 0 s, so no search ran
