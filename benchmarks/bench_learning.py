"""Learned costs in simulated worlds where some grounded actions fail with hidden probabilities (`make bench`,
never `make test`). One 200-episode run of three arms (cost-blind, learned, oracle) in the tools world (see
benchmarks/experiments/learning_eval.py), and the family of generated worlds
(benchmarks/experiments/learning_worlds.py).

Targets (reported, not asserted): in the final window of 25 episodes the learned arm's success rate is >= 95% of
the oracle's and its failures <= half of the cost-blind arm's; learned costs add <= 10% to warm plan latency.
Writes benchmarks/results/learning.{md,png,json}.

    pytest benchmarks/bench_learning.py --benchmark-only
    python -m benchmarks.experiments.learning_eval --episodes 200        # the same run, table on stdout
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from benchmarks.experiments.learning_eval import RESULTS_DIR, evaluate, report, verdicts, windows, write_results

pytestmark = pytest.mark.slow


def test_learning_200_episodes(benchmark) -> None:
    """The whole evaluation once (rounds=1): its wall time is the benchmark; the numbers go to extra_info."""
    evaluation = benchmark.pedantic(
        lambda: evaluate(episodes=200, retrain_every=10, window=25, seed=0, traces=RESULTS_DIR / "learning-traces.db"),
        rounds=1, iterations=1,
    )  # fmt: skip
    write_results(evaluation, RESULTS_DIR)
    print("\n" + report(evaluation))
    info = benchmark.extra_info
    info["windows"] = [
        {"episodes": f"{row.first}-{row.last}", "success": row.success, "expected": row.expected}
        for row in windows(evaluation)
    ]
    for verdict in verdicts(evaluation):
        info[verdict.name] = {
            "measured": verdict.measured,
            "target": verdict.target,
            "met": verdict.met,
            "on_expected_success": verdict.noise_free,
        }
    if evaluation.latency is not None:
        info["latency"] = asdict(evaluation.latency)
    info["model_versions"] = evaluation.model_versions
    assert len(evaluation.outcomes) == 3 * 200 and all(o.solved for o in evaluation.outcomes)


def test_learning_worlds(benchmark) -> None:
    """The family of generated worlds (benchmarks/experiments/learning_worlds.py) at the default exploration policy, 20
    held-out worlds per type: writes benchmarks/results/learning-worlds.{md,json,png}; its wall time is the
    benchmark. The three policies side by side: `python -m benchmarks.experiments.learning_worlds --seeds 5`."""
    from benchmarks.experiments.learning_worlds import main

    code = benchmark.pedantic(lambda: main(["--policies", "mean"]), rounds=1, iterations=1)
    assert code == 0
