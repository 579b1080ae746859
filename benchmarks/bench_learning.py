"""Learned costs in simulated worlds where some grounded actions fail with hidden probabilities (`make bench`,
never `make test`): `portfolio bench learning`'s harness (`portfolio/benchsuite/worlds/`) under pytest-benchmark.

- `test_learning_tools_worlds`: three `tools` worlds (the bundled tools domain, situation-dependent faults: the
  world the failure model was first tuned on), 200 episodes, the default explore policy, with warm latency
  measured after each world (60 rounds). Writes benchmarks/results/learning.{md,json,png}.
- `test_learning_worlds`: every world type, 20 held-out worlds each (benchmarks/experiments/learning_worlds.py),
  writes benchmarks/results/learning-worlds.{md,json,png}.

Targets (reported, not asserted): in the last window of 50 episodes the learned arm's expected success is >= 95%
of the exact oracle's and its failures <= half of cost-blind's where the oracle halves them; learned costs add
<= 10% to warm plan latency over a planner that records its plans.

    pytest benchmarks/bench_learning.py --benchmark-only
    portfolio bench learning --kinds tools --seeds 3 --policies mean --latency-rounds 60   # the first, on stdout
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TOOLS_WORLDS = [("tools", seed) for seed in range(200, 203)]  # held out (`bench learning --help`)


def test_learning_tools_worlds(benchmark) -> None:
    """Three tools worlds once (rounds=1): the wall time is the benchmark; the targets go to extra_info."""
    from learning.explore import DEFAULT_EXPLORE
    from portfolio.benchsuite.worlds.report import summarise, write_results
    from portfolio.benchsuite.worlds.runner import run_worlds

    policies = [DEFAULT_EXPLORE]
    runs = benchmark.pedantic(
        lambda: run_worlds(TOOLS_WORLDS, episodes=200, retrain_every=10, policies=policies, latency_rounds=60),
        rounds=1, iterations=1,
    )  # fmt: skip
    paths = write_results({"tools": runs}, policies, RESULTS_DIR, stem="learning")
    print("\n" + paths["report"].read_text())
    summary = summarise(runs, policies)
    info = benchmark.extra_info
    info["windows"] = summary["windows"]
    for key in ("pooled_success_vs_oracle", "pooled_failures_vs_blind_avoidable", "latency", "quality"):
        info[key] = summary[DEFAULT_EXPLORE][key]
    assert len(runs) == len(TOOLS_WORLDS)
    assert all(len(r.success[arm]) == 200 for r in runs for arm in r.success)
    assert all(r.latency[DEFAULT_EXPLORE]["rounds"] == 60 for r in runs)


def test_learning_worlds(benchmark) -> None:
    """The family of generated worlds (benchmarks/experiments/learning_worlds.py) at the default exploration policy, 20
    held-out worlds per type: writes benchmarks/results/learning-worlds.{md,json,png}; its wall time is the
    benchmark. The three policies side by side: `python -m benchmarks.experiments.learning_worlds --seeds 5`."""
    from benchmarks.experiments.learning_worlds import main

    code = benchmark.pedantic(lambda: main(["--policies", "cautious"]), rounds=1, iterations=1)
    assert code == 0
