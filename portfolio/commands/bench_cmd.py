"""`portfolio bench`: benchmark planners on suites of tasks (run, report), the classic latency table, and learned
costs over generated worlds (learning).

`bench run` and `bench report` are thin layers over `portfolio.benchsuite`; `bench latency` (and `bench` with
its old flags and no subcommand, for compatibility) over `portfolio.benchsuite.measure`; `bench learning`
(`bench_learning_cmd.py`) over `portfolio.benchsuite.worlds`.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path

from portfolio.commands.common import fail_bad_input, is_seconds

EPILOG = """\
examples:
  portfolio bench run gen:logistics:sizes=2..20 --planners cascade,driver:lama-first --out results/
  portfolio bench run ../shared/ipc --per-domain 10 --planners classical,driver:lama-first,up:pyperplan \\
      --budget 1 --out results/    # interrupted? run the same command again: finished runs are skipped
  portfolio bench run ../shared/ipc-more/pairs.txt --planners cascade --dask tcp://scheduler:8786 --out r/
  portfolio bench report results/ --baseline driver:lama-first   # report.md, report.html, *.png
  portfolio bench latency --ipc ../shared/ipc   latency table: warm first plan, replan, raw driver
  portfolio bench learning --kinds pairs,type --seeds 3 --out results/   learned costs vs cost-blind and oracle
  portfolio bench --ipc ../shared/ipc --coverage --per-domain 10   (the same, old spelling, plus coverage)
  portfolio bench --ipc ../shared/ipc-more/pairs.txt --coverage --per-domain 5   coverage only, on a pairs.txt
"""

RUN_EPILOG = """\
SUITE is one of:
  DIR                         a domain folder (domain.pddl + problems) or a folder of them (../shared/ipc)
  FILE                        a pairs file: DOMAIN PROBLEM per line, relative to the file (ipc-more/pairs.txt)
  gen:NAME:sizes=A..B[:seeds=C..D]   a bundled generator sweep: gen:logistics:sizes=2..20
  typed:research | typed:MODULE:FACTORY   a typed-agent scenario (typed actions compiled to a task):
                              MODULE importable (on PYTHONPATH, also in each run's process and on Dask
                              workers), FACTORY a function without arguments returning a list of @action
                              functions; goal: what the @action(goal=True) ones produce; start: every input
                              type no action produces (typed:research is domains.bundled.tools_sim:make_tools)
  latency                     the instances of the old latency table, under --ipc

PLANNERS (comma-separated): cascade, classical (Fast Downward + pyperplan), cascade:A+B, a delegate by name
(fast-downward, pyperplan, typed-search, goal-agenda), driver:ALIAS (the raw Fast Downward driver, e.g.
driver:lama-first), up:ENGINE (an installed unified-planning engine: up:pyperplan, up:fast-downward).

Each run is a process of its own (own process group, killed at its budget) and appends one JSON line to
OUT/runs.jsonl (status, wall_s, time_s, setup_s, translate_s, search_s, plan_length, plan_cost, valid,
peak_mem_kb, size). Runs already in the file are skipped, so an interrupted experiment resumes.

examples:
  portfolio bench run gen:blocksworld:sizes=2..8:seeds=0..4 --planners typed-search,cascade --out r/
  portfolio bench run ../shared/ipc --per-domain 3 --planners classical,driver:lama-first --repeat 3 --out r/
  portfolio bench run ../shared/ipc --planners classical --dask tcp://127.0.0.1:8786 --out r/
"""


def _add_latency_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ipc",
        type=Path,
        default=Path("../shared/ipc"),
        help="IPC benchmark folder, one domain "
        "folder of it (domain.pddl + problems, e.g. ../shared/ipc/blocks), or a pairs.txt (one "
        "'DOMAIN PROBLEM' pair a line, relative to its folder; coverage only)",
    )
    parser.add_argument("--rounds", type=int, default=7, help="rounds per measurement (median; default 7)")
    parser.add_argument("--coverage", action="store_true", help="also measure coverage within --budget")
    parser.add_argument("--per-domain", type=int, default=10, help="smallest problems per domain (default 10)")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per task for --coverage")
    parser.add_argument("--json", action="store_true", help="print results as JSON")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark planners: run suites, report tables and plots, latency against the driver",
        description="Benchmark planners. `bench run` runs planners on suites of tasks (each run in its own "
        "process, resumable, locally or on a Dask cluster); `bench report` writes Markdown/HTML tables and PNG "
        "plots; `bench latency` (or `bench` with no subcommand) prints the warm Planner's latency next to "
        "`fast-downward.py --alias lama-first`; `bench learning` plays generated worlds whose actions fail "
        "with hidden probabilities, planning cost-blind, with learned costs and with the true costs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_latency_arguments(parser)
    parser.set_defaults(func=run_latency)
    commands = parser.add_subparsers(dest="bench_command", metavar="{run,report,latency,learning}")

    run = commands.add_parser(
        "run",
        help="run planners on suites; results appended to OUT/runs.jsonl",
        description="Run every planner on every task of the suites, --repeat times, interleaved across "
        "planners, each run under its own hard budget.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("suites", nargs="+", metavar="SUITE", help="what to plan (see below)")
    run.add_argument("--planners", required=True, help="comma-separated planners (see below)")
    run.add_argument("--out", type=Path, required=True, help="results folder (created; resumed if it has runs)")
    run.add_argument("--budget", type=float, default=1.0, help="seconds per run for the planner (default 1)")
    run.add_argument(
        "--decomposer-budget",
        type=float,
        default=30.0,
        help="seconds for the decomposer tier of cascade / goal-agenda planners (default 30)",
    )
    run.add_argument("--repeat", type=int, default=1, help="runs per (task, planner) (default 1)")
    run.add_argument("--per-domain", type=int, default=None, help="only the K smallest problems of each domain")
    run.add_argument("--ipc", type=Path, default=Path("../shared/ipc"), help="IPC folder for the `latency` suite")
    run.add_argument("--jobs", type=int, default=None, help="runs at a time locally (default: the cores)")
    run.add_argument(
        "--dask",
        metavar="ADDRESS",
        default=None,
        help="run on this Dask scheduler (tcp://host:8786) instead of locally",
    )
    run.add_argument(
        "--setup-timeout",
        type=float,
        default=60.0,
        help="seconds a run may take to start before it is killed (default 60)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.set_defaults(func=run_suites)

    report = commands.add_parser(
        "report",
        help="write report.md, report.html and PNG plots for a results folder",
        description="Coverage per domain, median/p95 latency and ratios to a baseline planner; a cactus plot, "
        "latency against task size, and a scatter of each planner against the baseline.",
    )
    report.add_argument("dir", type=Path, metavar="DIR", help="results folder of `bench run`")
    report.add_argument("--baseline", default=None, help="planner the ratios are to (default: the first)")
    report.set_defaults(func=run_report)

    latency = commands.add_parser(
        "latency",
        help="latency (and coverage) of the warm Planner next to the raw driver",
        description="Time the warm Planner (first plan of a task; replan from a changed state) next to "
        "`fast-downward.py --alias lama-first` on the same IPC instances in the same run, and the cold start of "
        "`portfolio plan`. With --coverage, count tasks solved within --budget by both.",
    )
    _add_latency_arguments(latency)
    latency.set_defaults(func=run_latency)

    from portfolio.commands import bench_learning_cmd

    bench_learning_cmd.add_parser(commands)


# -- bench run / report ----------------------------------------------------------------------------------------


def run_suites(args: argparse.Namespace) -> int:
    from domains.errors import TaskInputError
    from portfolio.benchsuite import report, runner, suites
    from portfolio.benchsuite.planners import PlannerError, parse_planners
    from portfolio.benchsuite.store import read_runs, runs_path

    for name, value in (
        ("--budget", args.budget),
        ("--decomposer-budget", args.decomposer_budget),
        ("--setup-timeout", args.setup_timeout),
    ):
        # inf passed `> 0`: every run was an error and runs.jsonl got `"budget_s": Infinity`, which is not JSON
        if not is_seconds(value):
            return fail_bad_input(f"{name} must be a finite number > 0, got {value}")
    for name, value in (("--repeat", args.repeat), ("--jobs", args.jobs), ("--per-domain", args.per_domain)):
        if value is not None and value < 1:
            return fail_bad_input(f"{name} must be >= 1, got {value}")
    try:
        planners = parse_planners(args.planners)
        tasks = suites.read_suites(args.suites, args.per_domain, args.ipc)
    except (PlannerError, TaskInputError) as error:
        return fail_bad_input(str(error))
    specs = runner.plan_runs(tasks, planners, args.repeat, args.budget, args.decomposer_budget, args.setup_timeout)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / report.EXPERIMENT_FILE).write_text(
        json.dumps(
            {
                "suites": args.suites,
                "planners": planners,
                "budget_s": args.budget,
                "repeat": args.repeat,
                "per_domain": args.per_domain,
                "decomposer_budget_s": args.decomposer_budget,
            },
            indent=1,
        )
    )
    try:
        counts = runner.run_experiment(
            specs, args.out, jobs=args.jobs, dask_address=args.dask, progress=not args.no_progress
        )
    except TaskInputError as error:
        return fail_bad_input(str(error))
    except (OSError, TimeoutError) as error:
        if args.dask:
            return fail_bad_input(f"cannot use the Dask scheduler at {args.dask}: {error}")
        raise
    print(
        f"{counts['ran']} runs done, {counts['skipped']} already in {args.out / 'runs.jsonl'}, "
        f"{counts['total']} in the experiment"
    )
    print_coverage(report.coverage(read_runs(runs_path(args.out))), planners)
    print(f"report: portfolio bench report {args.out}")
    return 0


def print_coverage(table: dict[str, dict[str, tuple[int, int]]], planners: list[str]) -> None:
    width = max([len("domain")] + [len(d) for d in table]) + 1
    cells = [max(len(p), 7) for p in planners]
    print(f"{'domain':<{width}}" + "".join(f" {p:>{w}}" for p, w in zip(planners, cells)))
    for domain, row in table.items():
        print(
            f"{domain:<{width}}"
            + "".join(f" {(f'{row[p][0]}/{row[p][1]}' if p in row else '-'):>{w}}" for p, w in zip(planners, cells))
        )


def run_report(args: argparse.Namespace) -> int:
    from portfolio.benchsuite.report import write_report
    from portfolio.benchsuite.store import ResultsError

    if not args.dir.is_dir():
        return fail_bad_input(f"{args.dir}: no such results folder")
    try:
        paths = write_report(args.dir, args.baseline)
    except ResultsError as error:
        return fail_bad_input(str(error))
    for kind, path in paths.items():
        print(f"{kind:<24} {path}")
    return 0


# -- bench latency (the old `portfolio bench`) ------------------------------------------------------------------


def run_latency(args: argparse.Namespace) -> int:
    from portfolio.benchsuite import measure
    from portfolio.benchsuite.suites import benchmark_pairs

    # --rounds 0 ended in statistics' "no median for empty data", --budget 0 or inf in Tier's ValueError
    if args.rounds < 1 or args.per_domain < 1:
        return fail_bad_input(f"--rounds and --per-domain must be >= 1, got {args.rounds} and {args.per_domain}")
    if not is_seconds(args.budget):
        return fail_bad_input(f"--budget must be a finite number > 0, got {args.budget}")
    if args.ipc.is_file():
        if not args.coverage:
            return fail_bad_input(f"{args.ipc} is a pairs file: it only works with --coverage")
        try:
            benchmark_pairs(args.ipc)
        except ValueError as error:
            return fail_bad_input(str(error))
        report: dict = {}
        rows = []
    elif not ((args.ipc / "blocks" / "domain.pddl").exists() or (args.ipc / "domain.pddl").exists()):
        return fail_bad_input(
            f"{args.ipc} is neither the IPC folder (no blocks/domain.pddl) nor a domain folder (no domain.pddl)"
        )
    else:
        rows = measure.latency(args.ipc, rounds=args.rounds)
        cold = measure.cold_start(args.ipc, rounds=max(3, args.rounds // 2))
        report = {
            "latency": [asdict(r) | {"first_ratio": r.first_ratio, "replan_ratio": r.replan_ratio} for r in rows],
            "median_first_ratio": statistics.median(r.first_ratio for r in rows),
            "median_replan_ratio": statistics.median(r.replan_ratio for r in rows),
            "cold_start_s": cold,
        }
    if args.coverage:
        cover = measure.coverage(args.ipc, per_domain=args.per_domain, budget_s=args.budget)
        report["coverage"] = [asdict(c) for c in cover]
        report["coverage_total"] = {
            "planner": sum(c.planner for c in cover),
            "driver": sum(c.driver for c in cover),
            "invalid": sum(c.invalid for c in cover),
            "late": sum(c.late for c in cover),
            "tasks": sum(c.tasks for c in cover),
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if rows:
        print(f"{'instance':<36} {'driver ms':>10} {'first ms':>9} {'ratio':>6} {'replan ms':>10} {'ratio':>6}")
        for r in rows:
            print(
                f"{r.instance:<36} {r.driver_ms:>10.1f} {r.first_plan_ms:>9.1f} {r.first_ratio:>6.2f} "
                f"{r.replan_ms:>10.1f} {r.replan_ratio:>6.2f}"
            )
        print(
            f"median first-plan / driver: {report['median_first_ratio']:.2f}   "
            f"median replan / first plan: {report['median_replan_ratio']:.2f}   "
            f"cold start: {report['cold_start_s']:.2f} s"
        )
    if args.coverage:
        print(f"\n{'domain':<30} {'tasks':>5} {'planner':>7} {'driver':>6} {'invalid':>7} {'late':>4}")
        for c in report["coverage"]:
            print(
                f"{c['domain']:<30} {c['tasks']:>5} {c['planner']:>7} {c['driver']:>6} {c['invalid']:>7} {c['late']:>4}"
            )
        total = report["coverage_total"]
        print(f"{'total':<30} {total['tasks']:>5} {total['planner']:>7} {total['driver']:>6}")
    return 0


run = run_latency  # the old entry point's name
