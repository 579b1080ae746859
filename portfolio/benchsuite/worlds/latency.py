"""What learned costs add to a warm planning call, measured apart from the episodes (`--latency-rounds`).

    latency = measure_latency(plain, learner, recorder, task, context, rounds=60)   # a Latency (medians, ms)
    latency = warm_latency(plain, learner, task, context, rounds=60)   # the same with a recorder of its own
    summary = latency_summary(runs, policy)          # over worlds: the spread of each field
    lines = latency_table(summaries, policies)       # the report's section

In an episode a learned call's latency (`WorldRun.latency_ms`) includes whatever search the costs led it to, so
it says little about what the costs themselves cost. Here the same task is planned again and again by three warm
planners: one without a trace store, one that records its plans in a store of the same kind but has no model,
and the learner after its last retrain. Learned costs are billed only for what they add over recording (the
project's <= 10% target, `TARGET_OVERHEAD`), recording for what it adds over planning. The three take turns in
`portfolio.benchsuite.order.interleaved`'s rotating order, so machine load and going first fall on each alike;
the cost lookup (`Planner.learned_costs`) is timed once cold, right after `reload_model` (cache empty: the
grounding list plus one predict_proba), and then warm, a cache hit as in every learned call timed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TARGET_OVERHEAD = 0.10  # learned vs recorded, warm
WARM_UP = 3  # calls of each planner before timing: translation cached, search processes started, costs cached


@dataclass
class Latency:
    """Medians of `rounds` warm `Planner.plan` calls of each configuration on one task, interleaved."""

    rounds: int
    plain_ms: float  # no trace store
    recorded_ms: float  # a trace store that records the plan, no model: what learned costs are measured against
    learned_ms: float
    overhead: float  # learned vs recorded: what learned costs themselves add
    store_overhead: float  # recorded vs plain: what recording every plan in SQLite adds
    cost_lookup_cold_ms: float
    cost_lookup_warm_ms: float  # a cache hit, as in every learned call above


def measure_latency(plain, learner, recorder, task, context: Mapping[str, Any], rounds: int) -> Latency:
    """Median warm latency of `plain.plan(task)`, `recorder.plan(...)` and `learner.plan(...)` (both with
    `features=context`, recorded under a run "latency" of their own stores), and of the learner's cost lookup.
    `recorder` has a trace store of the learner's kind and no model."""
    from portfolio.benchsuite.order import interleaved

    if rounds < 1:
        raise ValueError(f"latency rounds must be >= 1, got {rounds}")
    features = dict(context)
    runs = {
        name: planner.store.start_run(task.fingerprint, "latency", run_id="latency")
        for name, planner in (("recorded", recorder), ("learned", learner))
    }
    learner.reload_model()
    t0 = time.perf_counter()
    learner.learned_costs(task, features=features)
    cold = (time.perf_counter() - t0) * 1000
    calls = {
        "plain": lambda: plain.plan(task),
        "recorded": lambda: recorder.plan(task, features=features, run_id=runs["recorded"]),
        "learned": lambda: learner.plan(task, features=features, run_id=runs["learned"]),
    }
    for _ in range(WARM_UP):
        for call in calls.values():
            call()
    timings: dict[str, list[float]] = {name: [] for name in (*calls, "lookup")}
    for _, _, order in interleaved([task], tuple(calls), repeats=rounds, rotate=True):
        for name in order:
            t0 = time.perf_counter()
            calls[name]()
            timings[name].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        learner.learned_costs(task, features=features)
        timings["lookup"].append((time.perf_counter() - t0) * 1000)
    p, r, q = (statistics.median(timings[k]) for k in ("plain", "recorded", "learned"))
    return Latency(
        rounds=rounds,
        plain_ms=round(p, 2),
        recorded_ms=round(r, 2),
        learned_ms=round(q, 2),
        overhead=round(q / r - 1.0, 4),
        store_overhead=round(r / p - 1.0, 4),
        cost_lookup_cold_ms=round(cold, 2),
        cost_lookup_warm_ms=round(statistics.median(timings["lookup"]), 3),
    )


def warm_latency(plain, learner, task, context: Mapping[str, Any], rounds: int) -> Latency:
    """`measure_latency` with a recorder of its own whose trace store is of the learner's kind (memory, or a
    file in a temporary folder), so that only what learned costs add is billed to them."""
    import tempfile
    from pathlib import Path

    from portfolio.planner import Planner

    with tempfile.TemporaryDirectory(prefix="portfolio-latency-") as folder:
        in_memory = str(learner.traces_path) == ":memory:"
        with Planner(traces=":memory:" if in_memory else Path(folder) / "no-model.db") as recorder:
            return measure_latency(plain, learner, recorder, task, context, rounds)


FIELDS = ("plain_ms", "recorded_ms", "learned_ms", "overhead", "store_overhead", "cost_lookup_cold_ms")


def latency_summary(runs: Sequence[Any], policy: str) -> dict | None:
    """Over the worlds measured (`WorldRun.latency[policy]`, a `Latency` as a dict): median, min and max of each
    field, how many worlds, and how many meet `TARGET_OVERHEAD`; None when none was measured."""
    rows = [r.latency[policy] for r in runs if r.latency.get(policy)]
    if not rows:
        return None
    out: dict = {"worlds": len(rows), "within_target": sum(row["overhead"] <= TARGET_OVERHEAD for row in rows)}
    for name in (*FIELDS, "cost_lookup_warm_ms"):
        values = [row[name] for row in rows]
        out[name] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return out


def latency_table(summaries: Mapping[str, Mapping[str, Any]], policies: Sequence[str]) -> list[str]:
    """The report's section: per type and policy, the spread over worlds (median [min, max]) of each field;
    empty when no world was measured."""
    rows = []
    for kind, summary in summaries.items():
        for policy in policies:
            s = summary.get(policy, {}).get("latency")
            if s:
                cells = [f"{s[f]['median']:.3g} [{s[f]['min']:.3g}, {s[f]['max']:.3g}]" for f in FIELDS]
                rows.append(
                    f"| {kind} | {policy} | {s['worlds']} | " + " | ".join(cells) + f" | {s['within_target']} |"
                )
    if not rows:
        return []
    return [
        "",
        "Warm latency on each world's last task, apart from the episodes (median of the rounds; median [min, max] "
        f"over worlds): learned costs' overhead over a planner that records its plans without a model (target <= "
        f"{TARGET_OVERHEAD:.2f}), recording's over no trace store, the cost lookup right after a model reload:",
        "",
        "| type | policy | worlds | no store ms | recording ms | learned ms | learned / recording - 1 "
        "| recording / no store - 1 | cold cost lookup ms | worlds within target |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
