"""How long a translator worker takes to answer when a translation is stopped at its deadline.

    PYTHONPATH=. python -m benchmarks.experiments.abort_latency [--budgets 0.3,1.5,3]

Translates the largest parking problem of ../shared/ipc (~10 s) in a warm worker (`portfolio.engine.workers`)
given an abort grace of 10 s, stops it at each budget and prints how long the worker took to answer the abort
(`ping` answered after it) and whether it was kept. This is what set `WorkerProcess`'s default (kill at once:
unwinding CPython's translator frees every object by refcount, 0.5-0.6 s past a 1.5 s translation, where a fresh
worker is ready in ~0.2 s).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from portfolio.delegates.fast_downward import translate
from portfolio.engine.workers import BudgetExpired, WorkerProcess

PARKING = Path("../shared/ipc/parking-sat11-strips")


def measure(budgets: list[float]) -> list[tuple[float, float, bool]]:
    """(budget, seconds from the deadline to the worker's next answer, same process) per budget."""
    worker = WorkerProcess(preload=translate.PRELOAD, abort_grace_s=10.0)
    hardest = max(PARKING.glob("pfile*.pddl"), key=lambda p: p.stat().st_size)
    texts = {"domain_pddl": (PARKING / "domain.pddl").read_text(), "problem_pddl": hardest.read_text()}
    out = []
    try:
        worker.call("ping", time.monotonic() + 60)
        for budget in budgets:
            pid = worker.pid
            deadline = time.monotonic() + budget
            try:
                worker.call(translate.TRANSLATE_OP, deadline, **texts)
            except BudgetExpired:
                pass
            worker.call("ping", time.monotonic() + 60)
            out.append((budget, time.monotonic() - deadline, worker.pid == pid))
    finally:
        worker.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budgets", default="0.3,1.5,3", help="seconds before the stop (default 0.3,1.5,3)")
    args = parser.parse_args()
    budgets = [float(b) for b in args.budgets.split(",")]
    for budget, seconds, kept in measure(budgets):
        print(f"stopped at {budget:4.1f} s: answered {seconds:6.3f} s later, kept: {kept}")


if __name__ == "__main__":
    main()
