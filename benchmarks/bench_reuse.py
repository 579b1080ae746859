"""Replans from a predicted state vs from a perturbed state, side by side with the first plan and the raw driver.

    PYTHONPATH=. python -m benchmarks.bench_reuse [rounds]      # one table, medians of `rounds` (default 5)

Per instance of `portfolio.benchsuite.suites.LATENCY_INSTANCES` (IPC, `../shared/ipc`), all in one run so load
hits every column alike:
- driver: `fast-downward.py --alias lama-first` (start-up, translation, search);
- first: the warm Planner's first plan (translation cache emptied each round);
- predicted: a replan halfway through the plan, from the state the plan predicted, passing the rest of the plan
  (`previous_plan`): answered by `plan-reuse`;
- perturbed: the same replan after another applicable action than the plan's next one was executed instead
  (chosen so that no suffix of the plan still works): a real replan (translation re-used), plus the failed
  reuse check. Small tasks are searched in this process (`portfolio.delegates.fast_downward.sas_search`); the `process`
  column is the same
  replan with that turned off (the search runs in a `downward` process, as before it existed).
Targets: perturbed <= 0.2x first, predicted <= 0.02x first (medians over the instances).
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from domains.ground_text import parse_ground_action
from domains.load import load_task
from domains.validate import applicable, apply
from portfolio.benchsuite.measure import median_seconds
from portfolio.benchsuite.planners import solve_with_driver
from portfolio.benchsuite.suites import LATENCY_INSTANCES
from portfolio.delegates.registry import CLASSICAL_ONLY
from portfolio.engine.results import PlanRequest
from portfolio.planner import REUSE_DELEGATE, Planner, reusable_suffix

IPC = Path(__file__).resolve().parents[1].parent / "shared" / "ipc"


def perturbed(planner: Planner, task, state, rest):
    """The state after an applicable action other than the plan's next one, chosen so no suffix of `rest`
    stays valid (a real replan is needed), or None when there is no such action."""
    grounded = planner.fast_downward.grounded_actions(PlanRequest(task=task, init=state), float("inf"))
    for text in grounded:
        action = parse_ground_action(text)
        if action == rest[0] or not applicable(task, state, action):
            continue
        after = apply(task, state, action)
        if reusable_suffix(task, after, rest) is None:
            return after
    return None


def row(planner: Planner, domain: str, problem: str, rounds: int) -> dict:
    domain_path, problem_path = IPC / domain / "domain.pddl", IPC / domain / problem
    task = load_task(domain_path, problem_path)
    fast_downward = planner.fast_downward
    plan = planner.plan(task).actions()

    def first() -> None:
        fast_downward.forget_translations()
        assert planner.plan(task).solved

    half = max(1, len(plan) // 2)
    state = task.problem.init
    for step in plan[:half]:
        state = apply(task, state, step)
    rest = [str(a) for a in plan[half:]]

    def predicted() -> None:
        result = planner.plan(task, init=state, previous_plan=rest)
        assert result.delegate == REUSE_DELEGATE

    moved = perturbed(planner, task, state, plan[half:])

    def replan() -> None:
        result = planner.plan(task, init=moved, previous_plan=rest)
        assert result.solved and result.delegate != REUSE_DELEGATE

    timings = {"instance": f"{domain}/{problem}", "first": median_seconds(first, rounds)}
    timings["predicted"] = median_seconds(predicted, rounds * 4)
    timings["perturbed"] = median_seconds(replan, rounds) if moved is not None else None
    settings = fast_downward.settings
    fast_downward.settings = replace(settings, inprocess_max_operators=-1)  # the process search only
    try:
        timings["process"] = median_seconds(replan, rounds) if moved is not None else None
    finally:
        fast_downward.settings = settings
    timings["driver"] = median_seconds(lambda: solve_with_driver(domain_path, problem_path), rounds)
    return timings


def main(rounds: int = 5) -> None:
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, cores: {len(os.sched_getaffinity(0))}"
    )
    rows = []
    with Planner(CLASSICAL_ONLY) as planner:
        for domain, problems in LATENCY_INSTANCES.items():
            for problem in problems:
                r = row(planner, domain, problem, rounds)
                rows.append(r)
                perturbed_ms = "   n/a" if r["perturbed"] is None else f"{r['perturbed'] * 1000:7.2f}"
                process_ms = "   n/a" if r["process"] is None else f"{r['process'] * 1000:7.2f}"
                print(
                    f"{r['instance']:38} driver {r['driver'] * 1000:7.1f} ms  first {r['first'] * 1000:7.1f} ms  "
                    f"predicted {r['predicted'] * 1000:6.3f} ms  perturbed {perturbed_ms} ms (process {process_ms} ms)",
                    flush=True,
                )
    first = statistics.median(r["first"] for r in rows)
    predicted = statistics.median(r["predicted"] / r["first"] for r in rows)
    both = [r for r in rows if r["perturbed"] is not None]
    perturbed_ratio = statistics.median(r["perturbed"] / r["first"] for r in both)
    process_ratio = statistics.median(r["process"] / r["first"] for r in both)
    driver_ratio = statistics.median(r["first"] / r["driver"] for r in rows)
    print(
        f"median first plan {first * 1000:.1f} ms = {driver_ratio:.2f}x the driver; replan / first plan: "
        f"predicted {predicted:.4f}x (target <= 0.02), perturbed {perturbed_ratio:.3f}x (target <= 0.2) "
        f"over {len(rows)} instances ({len(both)} perturbed); perturbed with the process search only: "
        f"{process_ratio:.3f}x"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
