"""The learning-worlds report's per-type numbers: the spread over worlds, the type's pooled ratio, and how many
worlds meet each target on their own (hand-made runs, so every number is known)."""

from __future__ import annotations

import pytest

from portfolio.benchsuite.worlds.report import WINDOW, report, summarise
from portfolio.benchsuite.worlds.runner import WorldRun


def _run(name: str, blind: float, learned: float, oracle: float) -> WorldRun:
    expected = {"cost-blind": [blind] * WINDOW, "learned-cautious": [learned] * WINDOW, "oracle": [oracle] * WINDOW}
    success = {arm: [True] * WINDOW for arm in expected}
    return WorldRun(name, "pairs", WINDOW, success=success, expected=expected)


def test_pooled_ratios_and_worlds_meeting_each_target():
    runs = [
        _run("pairs-1", blind=0.60, learned=0.90, oracle=0.90),  # failures 0.10 / 0.40 = 0.25; success 1.00
        _run("pairs-2", blind=0.80, learned=0.85, oracle=0.95),  # failures 0.15 / 0.20 = 0.75; success 0.895
        _run("pairs-3", blind=0.95, learned=0.95, oracle=0.95),  # cost-blind fails 5%: no failure target
    ]
    p = summarise(runs, ["cautious"])["cautious"]
    assert p["pooled_success_vs_oracle"] == pytest.approx((0.90 + 0.85 + 0.95) / (0.90 + 0.95 + 0.95), abs=1e-3)
    assert p["worlds_success_target"] == 2  # pairs-2 is below 0.95 of its oracle
    assert p["avoidable_worlds"] == 2
    assert p["pooled_failures_vs_blind_avoidable"] == pytest.approx((0.10 + 0.15) / (0.40 + 0.20), abs=1e-3)
    assert p["worlds_failures_target"] == 1  # pairs-2's 0.75 misses it
    assert p["success_vs_oracle"]["min"] == pytest.approx(0.895, abs=1e-3)  # the tail is still reported


def test_true_cost_is_compared_with_the_oracles_on_episodes_both_solved():
    """Success alone rewards caution, so the learned plans' true cost is pooled over the oracle's beside it; an
    episode either arm left unsolved (None) is left out of both sums."""
    runs = [_run("pairs-1", 0.60, 0.90, 0.90), _run("pairs-2", 0.80, 0.85, 0.95)]
    runs[0].true_cost = {"learned-cautious": [12.0] * WINDOW, "oracle": [10.0] * WINDOW}
    runs[1].true_cost = {"learned-cautious": [20.0] * (WINDOW - 1) + [None], "oracle": [20.0] * (WINDOW - 1) + [5.0]}
    p = summarise(runs, ["cautious"])["cautious"]
    assert p["pooled_true_cost_vs_oracle"] == pytest.approx((12 + 20) / (10 + 20), abs=1e-3)
    assert p["true_cost_vs_oracle"] == {"median": 1.1, "min": 1.0, "max": 1.2}
    assert "| 1.067 | 1.10 [1.00, 1.20] |" in report({"pairs": summarise(runs, ["cautious"])}, ["cautious"])


def test_the_report_prints_the_pooled_table():
    runs = [_run("pairs-1", 0.60, 0.90, 0.90), _run("pairs-2", 0.80, 0.85, 0.95)]
    text = report({"pairs": summarise(runs, ["cautious"])}, ["cautious"])
    assert "| pairs | cautious | 0.946 | 1 of 2 | 0.417 | 1 of 2 |" in text


def test_plan_quality_is_pooled_per_type_with_median_p95_and_calls_over_budget():
    from portfolio.benchsuite.worlds.scores import quality

    calls = [{"cost": 10.0 + i, "optimum": 10.0, "ms": 20.0 + i, "budget_ms": 1000.0} for i in range(19)]
    calls.append({"cost": 30.0, "optimum": 10.0, "ms": 1500.0, "budget_ms": 1000.0})  # one slow, 3x dear call
    q = quality(calls)
    assert q["calls"] == 20 and q["over_budget"] == 1
    assert q["ratio_median"] == pytest.approx(1.95)  # (1.9 + 2.0) / 2: costs 10..28 and 30 over 10
    assert q["ratio_p95"] == pytest.approx(2.8) and q["ratio_max"] == pytest.approx(3.0)  # nearest rank: 19th of 20
    assert q["within_1.05"] == pytest.approx(0.05) and q["ms_max"] == 1500.0
    run = _run("pairs-1", 0.60, 0.90, 0.90)
    run.quality = {"cautious": calls[:10]}
    run2 = _run("pairs-2", 0.60, 0.90, 0.90)
    run2.quality = {"cautious": calls[10:]}
    run.latency_ms = {"cost-blind": [10.0] * 5}
    run2.latency_ms = {"cost-blind": [10.0, 12.0, 14.0]}
    summary = {"pairs": summarise([run, run2], ["cautious"])}
    assert summary["pairs"]["cautious"]["quality"] == q  # pooled over the type's worlds
    assert summary["pairs"]["cautious"]["latency_vs_blind"] == pytest.approx(29.5 / 10.0)  # medians: 29.5 ms, 10 ms
    assert "| pairs | cautious | 20 | 1.950 | 2.800 | 3.000 | 0.05 |" in report(summary, ["cautious"])
    assert "| 1 | 2.950 |" in report(summary, ["cautious"])  # one call over budget; latency 2.95x cost-blind's
