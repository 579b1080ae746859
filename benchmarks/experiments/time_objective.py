"""The `time` objective's benchmark: mean time to the goal, goals reached and side-effect failures on
worlds where tools differ in speed, failure rate and failure kind (`portfolio.benchsuite.worlds.timed`).

    python -m benchmarks.experiments.time_objective --kinds speed sticky side-effects --seeds 0 1 2 \\
        --episodes 100 --json time_objective.json

Arms, on the same episodes with common random numbers, each executing its plans as the agent loop does
(transient failures retried, plan-ending ones replanned around):

    cost-blind  `Planner()` without traces: the task's own costs;
    risk        `Planner(traces=":memory:")`, the default objective, learning from an empty store;
    time        `Planner(traces=":memory:", objective="time")`, the default time parameters (replan penalty
                learned from the traces, side-effect weight 1, two retries);
    oracle      the optimal plan (Fast Downward A* with LM-cut, `worlds.exact`) under the true expected ms
                (`learning.objective.expected_ms` of the world's true parameters, the replan penalty the
                simulation charges).

Both learned arms record every attempt (duration, failure category, side effects) and retrain every
`--retrain-every` episodes. Reported per world type, pooled over seeds: mean ms per episode over the last half
of the episodes (learning done) and over all, goals reached, side-effect failures, the learned arms' plan
latency (median elapsed_ms of their calls with a model: different plans, so not a like-for-like comparison),
and the warm latency of one planner and model on the same tasks under each objective (`paired_latency`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from domains.model import GroundAction, Task
from portfolio.benchsuite.order import interleaved

ARMS = ("cost-blind", "risk", "time", "oracle")


def oracle_costs(kind: str):
    """The cost model of the oracle arm: expected seconds per grounded action under the true parameters."""
    import numpy as np

    from domains.ground_text import parse_ground_action
    from learning.objective import DEFAULT_SIDE_EFFECT_WEIGHT, expected_ms
    from portfolio.benchsuite.worlds.timed import MAX_RETRIES, REPLAN_MS, marginal

    def costs(grounded: Sequence[str]) -> dict[str, float]:
        truths = [marginal(kind, parse_ground_action(text)) for text in grounded]
        ms = expected_ms(
            np.array([t.p_fail for t in truths]), np.array([t.success_ms for t in truths]),
            np.array([t.failure_ms for t in truths]),
            np.array([float(t.transient and not t.side_effects) for t in truths]),
            np.array([float(t.side_effects) for t in truths]), MAX_RETRIES, REPLAN_MS, DEFAULT_SIDE_EFFECT_WEIGHT,
            np.array([t.p_fail if t.p_retry is None else t.p_retry for t in truths]),
        )  # fmt: skip
        return {text: float(m) / 1000.0 for text, m in zip(grounded, ms)}

    return costs


def run_world(kind: str, seed: int, episodes: int, retrain_every: int) -> dict[str, Any]:
    from domains.bundled import bundled_task
    from learning.retrain import retrain
    from portfolio.benchsuite.worlds.exact import ExactSearch
    from portfolio.benchsuite.worlds.timed import run_episode
    from portfolio.engine.results import PlanRequest
    from portfolio.planner import Planner
    from traces.records import StepRecord

    world = f"{kind}-{seed}"
    planners = {
        "cost-blind": Planner(),
        "risk": Planner(traces=":memory:"),
        "time": Planner(traces=":memory:", objective="time"),
    }
    exact = ExactSearch("tools")
    true_costs = oracle_costs(kind)
    out: dict[str, Any] = {"world": world, "kind": kind, "episodes": episodes, "arms": {}}
    for arm in ARMS:
        out["arms"][arm] = {"ms": [], "reached": [], "side_effect_failures": [], "latency_ms": []}
    started = time.perf_counter()
    try:
        for index in range(episodes):
            task = bundled_task("tools", 1 + (index + seed) % 2, seed * 1000 + index % 20)
            for arm in ARMS:
                record = out["arms"][arm]

                def plan(task: Task, state: frozenset, excluded: Sequence[GroundAction], arm: str = arm):
                    if arm == "oracle":
                        request = PlanRequest(
                            task=task, init=state, cost_function=true_costs, excluded=tuple(map(str, excluded))
                        )
                        result = exact.cascade.solve(request)
                    else:
                        result = planners[arm].plan(task, init=state, excluded=excluded, run_id=f"e{index}")
                        if planners[arm].model is not None:
                            record["latency_ms"].append(result.elapsed_ms)
                    return result.actions() if result.solved else None

                episode = run_episode(kind, world, index, task, plan)
                record["ms"].append(round(episode.ms, 1))
                record["reached"].append(episode.reached)
                record["side_effect_failures"].append(episode.side_effect_failures)
                store = planners[arm].store if arm in planners else None
                if store is None:
                    continue
                store.record_steps(
                    StepRecord(
                        run_id=f"e{index}",
                        step=i,
                        action=a.step.name,
                        args=a.step.args,
                        outcome="failure" if a.failed else "success",
                        duration_ms=round(a.ms, 3),
                        failure_category=("transient" if a.transient else "knowledge") if a.failed else None,
                        side_effects=a.side_effects if a.failed else None,
                    )  # fmt: skip
                    for i, a in enumerate(episode.attempts)
                )
                if (index + 1) % retrain_every == 0:
                    retrain(store, holdout_fraction=0.0)
                    planners[arm].reload_model()
        out["latency"] = paired_latency(planners["time"], [
            bundled_task("tools", 1 + (i + seed) % 2, seed * 1000 + i % 20) for i in range(episodes - 20, episodes)
        ])  # fmt: skip
    finally:
        for planner in planners.values():
            planner.close()
        exact.close()
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def paired_latency(planner, tasks: Sequence[Task], rounds: int = 10) -> dict[str, list[float]]:
    """Warm plan latency (elapsed_ms) of one planner and model on the same tasks under each objective, calls
    interleaved so that load on the machine falls on both alike; each task planned once under each first
    (translation and the learned-cost caches warm, as a runtime's planner is)."""
    out: dict[str, list[float]] = {"risk": [], "time": []}
    for task in tasks:
        for objective in out:
            planner.plan(task, objective=objective)
    for _, task, objectives in interleaved(tasks, list(out), rounds):
        for objective in objectives:
            out[objective].append(planner.plan(task, objective=objective).elapsed_ms)
    return out


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per world type and arm, pooled over seeds: mean ms (last half, all), goals reached, side-effect failures
    (last half, per 100 episodes) and median plan latency."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for kind in sorted({r["kind"] for r in runs}):
        rows = table[kind] = {}
        for arm in ARMS:
            late, every, reached, side, latency = [], [], [], [], []
            for run in (r for r in runs if r["kind"] == kind):
                record, half = run["arms"][arm], run["episodes"] // 2
                late += record["ms"][half:]
                every += record["ms"]
                reached += record["reached"][half:]
                side += record["side_effect_failures"][half:]
                latency += record["latency_ms"]
            rows[arm] = {
                "mean_ms_last_half": round(statistics.mean(late), 1),
                "mean_ms_all": round(statistics.mean(every), 1),
                "reached_last_half": round(sum(reached) / len(reached), 3),
                "side_effect_failures_per_100": round(100 * sum(side) / len(side), 2),
            }
            if latency:
                rows[arm]["median_latency_ms"] = round(statistics.median(latency), 2)
        for objective in ("risk", "time"):
            paired = [ms for run in runs if run["kind"] == kind for ms in run["latency"][objective]]
            rows[objective]["paired_warm_latency_ms"] = round(statistics.median(paired), 3)
    return table


def main(argv: Sequence[str] | None = None) -> int:
    from portfolio.benchsuite.worlds.timed import KINDS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--retrain-every", type=int, default=10)
    parser.add_argument("--json", metavar="FILE", help="write every episode's numbers and the summary here")
    args = parser.parse_args(argv)
    runs = []
    for kind in args.kinds:
        for seed in args.seeds:
            runs.append(run_world(kind, seed, args.episodes, args.retrain_every))
            print(f"{kind}-{seed}: {runs[-1]['seconds']} s", file=sys.stderr)
    table = summarise(runs)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "summary": table, "runs": runs}, handle)
    print(
        f"{'world':<13} {'arm':<10} {'ms (last half)':>14} {'ms (all)':>9} {'reached':>8} {'side/100':>8} "
        f"{'plan ms':>8} {'warm ms':>8}"
    )
    for kind, rows in table.items():
        for arm, row in rows.items():
            latency, warm = row.get("median_latency_ms"), row.get("paired_warm_latency_ms")
            print(
                f"{kind:<13} {arm:<10} {row['mean_ms_last_half']:>14.0f} {row['mean_ms_all']:>9.0f} "
                f"{row['reached_last_half']:>8.3f} {row['side_effect_failures_per_100']:>8.1f} "
                f"{'-' if latency is None else f'{latency:.1f}':>8} {'-' if warm is None else f'{warm:.2f}':>8}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
