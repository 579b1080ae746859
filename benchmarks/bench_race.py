"""Coverage and latency within 1 s: Fast Downward racing diverse searches (one per core) vs lama-first alone vs
the raw driver, interleaved task by task so machine load hits all three alike.

    PYTHONPATH=. python -m benchmarks.bench_race [per_domain] [ipc|ipc-more|both] [CONFIG,...]
    # defaults: 5, ipc, lama-alone,race (CONFIGS: lama-alone, race, beside, race-skip)

Each task: the warm classical tier (Fast Downward + pyperplan, 1 s) with `fd_workers=1` (lama-first alone, as
before) and with the default (the cores available), then the raw driver (`fast-downward.py --alias lama-first`,
start-up included, killed at 1 s). Tasks our PDDL reader rejects count as unsolved for both planners (the raw
driver still gets them). Targets: coverage >= 1.1x the driver overall and >= it in every domain;
median first-plan latency <= 0.5x the driver's on the tasks both solve.

Measured 2026-11-30 (`5 both`, 230 tasks, 2 cores, load average ~9 from other sessions): race 121, lama-first
alone 119, driver 116 (1.04x; no domain below the driver; median latency 0.19x the driver's on 116 tasks). The
race won trucks p07, maintenance 000 (eager-ff-cg's plan), grid 02 and thoughtful 05, and lost thoughtful 03
and 04 to lama-first alone: under load two searches share what one had.

Again with the translator's collector paused (`portfolio.delegates.fast_downward.translate`; `5 both race,beside` then
`5 both
race,race-skip`, load average 6-11): race 123 vs driver 113 (1.09x; within 1.0 s exactly 119 vs 111), then
125 vs 119 (1.05x); no domain below the driver in either. Both alternatives lost: pyperplan beside Fast
Downward from 50 ms on ("beside") 120 (three processes on two cores; and on tasks with costs its cost-blind
plan comes first), the work-skipping translation for every task ("race-skip") 123. The tasks still missed
are search-bound (caldera p02, grid 02: translation 0.27-0.39 s CPU) or translation-bound far beyond 1 s
(parking, agricola). On a quiet machine (load average 0.5 -> 1.2, `5 both race`, with action elimination):
race 137 vs driver 133 (1.03x; load slows the cold driver more than the warm planner), no domain below the
driver, median latency 0.25x the driver's on the 133 both solve. Again at the end of the next session (load
0.8 -> 1.1): race 139 vs driver 135 (1.03x), none below, median latency 0.23x. Target (1.1x) not met; how far
the misses are beyond 1 s, and so what bounds it: `benchmarks/experiments/near_misses.py`.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from domains.load import load_task
from portfolio.benchsuite.order import interleaved
from portfolio.benchsuite.planners import solve_with_driver
from portfolio.delegates.registry import CLASSICAL_ONLY, build_stages
from portfolio.engine.results import PlanRequest
from portfolio.planner import Planner

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CONFIGS = {
    "lama-alone": {"fd_workers": 1},
    "race": {},
    # pyperplan beside Fast Downward for (almost) the whole second: Fast Downward's share ends after 50 ms
    # and it is carried over (its work goes on), so pyperplan starts then instead of at 0.8 s.
    "beside": {"shares": {"fast-downward": 1.0, "pyperplan": 19.0}},
    # a translation that skips work (`portfolio.delegates.fast_downward.translate`), for every task: the SAS is no
    # longer the driver's
    "race-skip": {"fd_translate_options": ("--keep-unreachable-facts", "--skip-variable-reordering")},
}


def problems(root: Path, per_domain: int):
    for domain in sorted(p for p in root.iterdir() if (p / "domain.pddl").exists()):
        found = sorted(
            (p for p in domain.glob("*.pddl") if p.name != "domain.pddl"), key=lambda p: (p.stat().st_size, p.name)
        )[:per_domain]
        for problem in found:
            yield domain.name, domain / "domain.pddl", problem


def main(per_domain: int = 5, which: str = "ipc", configs: str = "lama-alone,race") -> None:
    roots = {"ipc": ["ipc"], "ipc-more": ["ipc-more"], "both": ["ipc", "ipc-more"]}[which]
    chosen = {name: CONFIGS[name] for name in configs.split(",")}
    print(f"cores {len(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.2f}", flush=True)
    planners = {name: Planner(build_stages(CLASSICAL_ONLY, 1.0, **options)) for name, options in chosen.items()}
    solved: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    times: dict[str, dict[str, float]] = defaultdict(dict)
    try:
        time.sleep(3)  # workers finish importing
        tasks = (found for root in roots for found in problems(SHARED / root, per_domain))
        for _, (domain, domain_path, problem), order in interleaved(tasks, [*planners, "driver"]):
            key = f"{domain}/{problem.name}"
            try:
                task = load_task(domain_path, problem)
            except Exception as error:
                task, why = None, f"{type(error).__name__}"
            line = [key]
            for name in order:
                if name == "driver":  # it reads the PDDL itself: it runs on tasks our reader rejects too
                    ok, elapsed = solve_with_driver(domain_path, problem, timeout=1.0)
                    if ok:
                        solved[domain]["driver"] += 1
                        times[key]["driver"] = elapsed
                    line.append(f"driver: {'solved' if ok else 'no'} {elapsed * 1000:.0f}")
                    continue
                if task is None:
                    line.append(f"{name}: unread ({why})")
                    continue
                start = time.monotonic()
                result = planners[name].cascade.solve(PlanRequest(task))
                elapsed = time.monotonic() - start
                if result.solved:
                    solved[domain][name] += 1
                    times[key][name] = elapsed
                search = result.attempts[0].details.get("search", "") if result.attempts else ""
                line.append(f"{name}: {result.status.value} {result.delegate or ''}/{search} {elapsed * 1000:.0f}")
            solved[domain]["tasks"] += 1
            print(" | ".join(line), flush=True)
    finally:
        for planner in planners.values():
            planner.close()
    names = [*chosen, "driver"]
    totals = {name: sum(row[name] for row in solved.values()) for name in names}
    tasks = sum(row["tasks"] for row in solved.values())
    print(f"coverage of {tasks}: " + ", ".join(f"{n} {totals[n]}" for n in names))
    for name in chosen:
        worse = [d for d, row in solved.items() if row[name] < row["driver"]]
        both = [t for t in times.values() if name in t and "driver" in t]
        ratio = statistics.median(t[name] / t["driver"] for t in both) if both else float("nan")
        print(
            f"{name}: {totals[name] / max(1, totals['driver']):.2f}x the driver's coverage; domains below the "
            f"driver: {', '.join(worse) or 'none'}; median latency {ratio:.2f}x the driver on {len(both)} "
            f"tasks both solve"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 5,
        sys.argv[2] if len(sys.argv) > 2 else "ipc",
        sys.argv[3] if len(sys.argv) > 3 else "lama-alone,race",
    )
