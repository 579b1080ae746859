"""What learned costs add to a warm planning call: `measure_latency` for `benchmarks/experiments/learning_eval.py`.

The same task planned by three warm planners, interleaved so that machine load hits them alike: one without a
trace store, one that records its plans but has no model, one with learned costs. Learned costs are billed only
for what they add over recording (the issue's <= 10% target), recording for what it adds over planning.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.experiments.learning_data import DOMAIN, LATENCY_TASK, Latency
from domains.bundled import bundled_task


def measure_latency(plain, learner, specs: Sequence[Any], rounds: int) -> Latency:
    """Median warm latency of `plain.plan(task)` and `learner.plan(task, features=...)` on the same task,
    interleaved (alternating which goes first) so that machine load hits both alike; learned calls are
    recorded under one run, "latency"."""
    import tempfile

    from portfolio.planner import Planner

    task = bundled_task(DOMAIN, *LATENCY_TASK)
    # A third planner records plans in a trace store of its own but has no model, so recording (one SQLite
    # transaction per plan) is not billed to learned costs.
    folder = tempfile.TemporaryDirectory(prefix="portfolio-latency-")
    recorder = Planner(traces=Path(folder.name) / "no-model.db")
    context = next((s.context for s in specs), {"hour": "peak", "region": "eu"})
    run_id = learner.store.start_run(task.fingerprint, "latency", run_id="latency")
    learner.reload_model()
    t0 = time.perf_counter()
    learner.learned_costs(task, features=context)
    cold = (time.perf_counter() - t0) * 1000
    recorder_run = recorder.store.start_run(task.fingerprint, "latency", run_id="latency")
    for _ in range(3):  # warm all: translation cached, search processes started, costs cached
        plain.plan(task)
        recorder.plan(task, features=context, run_id=recorder_run)
        learner.plan(task, features=context, run_id=run_id)
    timings: dict[str, list[float]] = {"plain": [], "recorded": [], "learned": [], "lookup": []}
    calls = {
        "plain": lambda: plain.plan(task),
        "recorded": lambda: recorder.plan(task, features=context, run_id=recorder_run),
        "learned": lambda: learner.plan(task, features=context, run_id=run_id),
        "lookup": lambda: learner.learned_costs(task, features=context),
    }
    orders = (("plain", "recorded", "learned", "lookup"), ("learned", "recorded", "plain", "lookup"))
    try:
        for i in range(rounds):
            for name in orders[i % 2]:
                t0 = time.perf_counter()
                calls[name]()
                timings[name].append((time.perf_counter() - t0) * 1000)
    finally:
        recorder.close()
        folder.cleanup()
    p, r, q = (statistics.median(timings[k]) for k in ("plain", "recorded", "learned"))
    return Latency(
        rounds,
        round(p, 2),
        round(r, 2),
        round(q, 2),
        round(q / r - 1.0, 4),
        round(r / p - 1.0, 4),
        round(cold, 2),
        round(statistics.median(timings["lookup"]), 3),
    )
