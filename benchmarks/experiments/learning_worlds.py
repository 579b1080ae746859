"""Do learned costs approach the oracle in every kind of world, not only the one they were tuned on?

    python -m benchmarks.experiments.learning_worlds                 # every type, 20 held-out worlds each, 200 episodes
    python -m benchmarks.experiments.learning_worlds --kinds pairs,type --seeds 3 --episodes 100     # a quick look
    python -m benchmarks.experiments.learning_worlds --jobs 2            # two worlds at a time, each in its own process
    python -m benchmarks.experiments.learning_worlds --policies cautious --bundled-episodes 30  # plus plan quality on
    bundled tasks

The same command as `portfolio bench learning` (see its --help), with the checkout's results folder
(benchmarks/results/learning-worlds.{md,json,png}) as the default --out. The worlds, arms and report live in the
package, `portfolio/benchsuite/worlds/`: `family.py` generates worlds (one generator per type, several sizes,
faults drawn from the seed), `runner.py` plays cost-blind and learned (cautious, thompson, optimistic) arms planned
by the default cascade (as `portfolio plan` and `Planner(traces=...)`) and an exact oracle (`exact.py`: Dijkstra for
routes worlds, Fast Downward A* with LM-cut otherwise) on the same episodes, `report.py` writes per type, median and
range over worlds: success in
windows of 50 episodes, learned success as a share of the oracle's and failures as a share of cost-blind's in
the last window, calibration against the true probabilities (MAE, reliability bins), consistency (largest
|p_fail - observed rate| over groundings with >= 30 recorded steps), and for `type` worlds the p_fail a new
vehicle of the bad type starts with next to its siblings' recorded steps and observed rate; plan quality of the
learned calls (cost / optimum under the costs they planned with, latency against the budget). Seeds 0-19 were used
while building the model (tuning), 100-119 for earlier reports; the report uses seeds 200 and up (held out).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


def main(argv: Sequence[str] | None = None) -> int:
    from portfolio.cli import main as cli

    return cli(["bench", "learning", "--out", str(RESULTS_DIR), *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
