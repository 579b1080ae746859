"""Scores of a learning run beyond success: each learned call's plan quality (`quality`, over `WorldRun.quality`
entries, each made by `exact.quality_call`) and a learned arm's true cost beside the oracle's (`paired_costs`, over
`WorldRun.true_cost`); kept apart from `report`, which tabulates them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from portfolio.benchsuite.worlds.runner import WorldRun


def paired_costs(run: WorldRun, arm: str, window: slice) -> tuple[float, float] | None:
    """The learned arm's and the oracle's mean true cost over `window`, on the episodes both solved (None for
    runs recorded before true costs were, or with none solved by both)."""
    pairs = [
        (c, o)
        for c, o in zip(run.true_cost.get(arm, [])[window], run.true_cost.get("oracle", [])[window])
        if c is not None and o is not None
    ]
    if not pairs:
        return None
    return statistics.mean(c for c, _ in pairs), statistics.mean(o for _, o in pairs)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest-rank rule: a value that was measured, never an interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def quality(calls: Sequence[dict]) -> dict | None:
    """Plan quality over learned calls (`WorldRun.quality` entries): cost / optimum under the costs each call
    planned with (median, p95, max, share within 1.05), latency in ms (median, p95, max), calls over budget."""
    if not calls:
        return None
    ratios = [c["cost"] / c["optimum"] if c["optimum"] > 0 else 1.0 for c in calls]
    ms = [c["ms"] for c in calls]
    return {
        "calls": len(calls),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_p95": round(percentile(ratios, 0.95), 4),
        "ratio_max": round(max(ratios), 4),
        "within_1.05": round(sum(r <= 1.05 + 1e-9 for r in ratios) / len(ratios), 3),
        "ms_median": round(statistics.median(ms), 1),
        "ms_p95": round(percentile(ms, 0.95), 1),
        "ms_max": round(max(ms), 1),
        "over_budget": sum(c["ms"] > c["budget_ms"] for c in calls),
    }
