"""`portfolio bench`: planner latency and coverage side by side with the raw Fast Downward driver."""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path

from portfolio.commands.common import fail_bad_input

EPILOG = """\
examples:
  portfolio bench --ipc ../shared/ipc                       latency table (warm first plan, replan, driver)
  portfolio bench --ipc ../shared/ipc --coverage --per-domain 10   plus coverage within 1 s per domain
  portfolio bench --ipc ../shared/ipc-more/pairs.txt --coverage --per-domain 5
                                           coverage only, on the DOMAIN PROBLEM pairs a pairs.txt lists
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench", help="measure latency and coverage against the raw Fast Downward driver",
        description="Time the warm Planner (first plan of a task; replan from a changed state) next to "
        "`fast-downward.py --alias lama-first` on the same IPC instances in the same run, and the cold start of "
        "`portfolio plan`. With --coverage, count tasks solved within --budget by both.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ipc", type=Path, default=Path("../shared/ipc"), help="IPC benchmark folder, or a pairs.txt "
                        "(one 'DOMAIN PROBLEM' pair a line, relative to its folder; coverage only)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per measurement (median; default 7)")
    parser.add_argument("--coverage", action="store_true", help="also measure coverage within --budget")
    parser.add_argument("--per-domain", type=int, default=10, help="smallest problems per domain (default 10)")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per task for --coverage")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from portfolio import bench

    if args.ipc.is_file():
        if not args.coverage:
            return fail_bad_input(f"{args.ipc} is a pairs file: it only works with --coverage")
        try:
            bench.benchmark_pairs(args.ipc)
        except ValueError as error:
            return fail_bad_input(str(error))
        report: dict = {}
        rows = []
    elif not (args.ipc / "blocks" / "domain.pddl").exists():
        return fail_bad_input(f"{args.ipc} does not look like the IPC folder (no blocks/domain.pddl)")
    else:
        rows = bench.latency(args.ipc, rounds=args.rounds)
        cold = bench.cold_start(args.ipc, rounds=max(3, args.rounds // 2))
        report = {
            "latency": [asdict(r) | {"first_ratio": r.first_ratio, "replan_ratio": r.replan_ratio} for r in rows],
            "median_first_ratio": statistics.median(r.first_ratio for r in rows),
            "median_replan_ratio": statistics.median(r.replan_ratio for r in rows),
            "cold_start_s": cold,
        }
    if args.coverage:
        cover = bench.coverage(args.ipc, per_domain=args.per_domain, budget_s=args.budget)
        report["coverage"] = [asdict(c) for c in cover]
        report["coverage_total"] = {"planner": sum(c.planner for c in cover), "driver": sum(c.driver for c in cover),
                                    "invalid": sum(c.invalid for c in cover), "late": sum(c.late for c in cover),
                                    "tasks": sum(c.tasks for c in cover)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if rows:
        print(f"{'instance':<36} {'driver ms':>10} {'first ms':>9} {'ratio':>6} {'replan ms':>10} {'ratio':>6}")
        for r in rows:
            print(f"{r.instance:<36} {r.driver_ms:>10.1f} {r.first_plan_ms:>9.1f} {r.first_ratio:>6.2f} "
                  f"{r.replan_ms:>10.1f} {r.replan_ratio:>6.2f}")
        print(f"median first-plan / driver: {report['median_first_ratio']:.2f}   "
              f"median replan / first plan: {report['median_replan_ratio']:.2f}   "
              f"cold start: {report['cold_start_s']:.2f} s")
    if args.coverage:
        print(f"\n{'domain':<30} {'tasks':>5} {'planner':>7} {'driver':>6} {'invalid':>7} {'late':>4}")
        for c in report["coverage"]:
            print(f"{c['domain']:<30} {c['tasks']:>5} {c['planner']:>7} {c['driver']:>6} {c['invalid']:>7} "
                  f"{c['late']:>4}")
        total = report["coverage_total"]
        print(f"{'total':<30} {total['tasks']:>5} {total['planner']:>7} {total['driver']:>6}")
    return 0
