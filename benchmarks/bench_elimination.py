"""What greedy action elimination removes from Fast Downward's plans, and what it costs.

    PYTHONPATH=. python -m benchmarks.bench_elimination [--per-domain 3] [--budget 5]

For problems 3..2+per_domain of each `../shared/ipc` domain (by size), plans with the classical tier and
elimination off (`Planner(eliminate_steps=False)`), then runs `domains.action_elimination.eliminate` on the plan
and checks both plans with the validator (the reduced one valid, its cost never higher). Prints per problem the
steps and cost before and after and the elimination's time beside the planning call's, then the summary.

Measured 2026-11-30 (2 cores, load average 6-9 from other sessions): 36 problems of 12 domains, 8 with steps
removed (depot p04 58 -> 32 steps, barman pfile06-023 177 -> 143 and cost 330 -> 296, elevators p04 cost 180 ->
161, transport p11 522 -> 473), the others unchanged; elimination median 1.4 ms, max 498 ms (barman, 177 steps,
against 4.1 s of planning), median 1.2% of the planning call's time. The cascade bounds it by a quarter of the
call's time so far (at least 0.1 s) and the call's deadline (`portfolio.engine.cascade.ELIMINATION_SHARE`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from domains.action_elimination import eliminate
from domains.load import load_task
from domains.validate import validate_plan
from portfolio.delegates.registry import CLASSICAL_ONLY, build_stages
from portfolio.planner import Planner

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def problems(per_domain: int) -> list[tuple[Path, Path]]:
    out = []
    for domain in sorted(p for p in (SHARED / "ipc").iterdir() if (p / "domain.pddl").exists()):
        found = sorted(
            (p for p in domain.glob("*.pddl") if p.name != "domain.pddl"), key=lambda p: (p.stat().st_size, p.name)
        )
        out += [(domain / "domain.pddl", problem) for problem in found[2 : 2 + per_domain]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-domain", type=int, default=3)
    parser.add_argument("--budget", type=float, default=5.0, help="classical tier budget per problem (s)")
    args = parser.parse_args(argv)
    rows = []
    with Planner(build_stages(CLASSICAL_ONLY, budget_s=args.budget), eliminate_steps=False) as planner:
        for domain, problem in problems(args.per_domain):
            task = load_task(domain, problem)
            result = planner.plan(task)
            if not result.solved:
                print(f"{domain.parent.name:28s} {problem.name:24s} not solved in {args.budget:g} s")
                continue
            plan = result.actions()
            start = time.perf_counter()
            reduced = eliminate(task, plan)
            ms = (time.perf_counter() - start) * 1000
            before, after = validate_plan(task, plan), validate_plan(task, reduced)
            if not (before.ok and after.ok and after.cost <= before.cost):
                print(f"{problem}: elimination broke the plan", file=sys.stderr)
                return 1
            rows.append((len(plan), len(reduced), ms, result.elapsed_ms))
            print(
                f"{domain.parent.name:28s} {problem.name:24s} {len(plan):4d} -> {len(reduced):4d} steps, cost "
                f"{before.cost:g} -> {after.cost:g}, {ms:7.1f} ms (planning {result.elapsed_ms:7.0f} ms)",
                flush=True,
            )
    if not rows:
        return 1
    print(
        f"\n{len(rows)} problems, {sum(r[1] < r[0] for r in rows)} with steps removed (max share "
        f"{max(1 - r[1] / r[0] for r in rows):.2f}); elimination median {statistics.median(r[2] for r in rows):.1f}"
        f" ms, max {max(r[2] for r in rows):.1f} ms; median share of the planning call's time "
        f"{statistics.median(r[2] / r[3] for r in rows):.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
