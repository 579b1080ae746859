"""Does splitting the classical tier 4:1 cost Fast Downward coverage? The three smallest problems of every IPC
domain in ../shared/ipc, planned by two warm classical tiers of 1 s, interleaved task by task so machine load
hits both alike: Fast Downward with (nearly) the whole tier, as before time shares, and the default 4:1 split.

    PYTHONPATH=. python -m benchmarks.experiments.shares_coverage

Measured (2 cores shared with five other sessions, load average ~15): 33 of 39 solved by each; the six misses
(barman and parking) are the same for both and need seconds either way. The split gives pyperplan at least
0.2 s where it had 0.0 ms before.
"""

from __future__ import annotations

import sys
import time

from portfolio.benchsuite.order import interleaved
from portfolio.delegates.registry import CLASSICAL_ONLY, build_stages
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import PlanRequest
from tests.support import ipc_domains, load_ipc, smallest_problems

CONFIGS = {"fd-whole-tier": {"fast-downward": 1e9, "pyperplan": 1.0}, "4:1": None}


def main() -> int:
    cascades = {
        name: PortfolioDecomposition(build_stages(CLASSICAL_ONLY, 1.0, shares=shares))
        for name, shares in CONFIGS.items()
    }
    try:
        for cascade in cascades.values():
            for stage in cascade.delegates:
                for delegate in stage.delegates:
                    delegate.warm_up()
        time.sleep(3)  # workers finish importing
        solved = dict.fromkeys(CONFIGS, 0)
        total = 0
        tasks = ((domain, problem) for domain in ipc_domains() for problem in smallest_problems(domain, 3))
        for _, (domain, problem), names in interleaved(tasks, list(cascades)):
            task = load_ipc(domain, problem)
            total += 1
            for name in names:
                result = cascades[name].solve(PlanRequest(task))
                solved[name] += result.solved
                print(
                    f"{domain} {problem.name} {name}: {result.status.value} {result.delegate or ''} "
                    f"{result.elapsed_ms:.0f} ms",
                    flush=True,
                )
        print(f"solved of {total}: {solved}")
    finally:
        for cascade in cascades.values():
            cascade.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
