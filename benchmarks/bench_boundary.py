"""The tier boundary: on problems the raw driver cannot solve in 1 s, the default cascade (1 s + 30 s) with
Fast Downward's work carried over past the classical tier, the same cascade without carry-over (the old
behaviour), and the raw driver given the cascade's whole 31 s, interleaved task by task so load hits all alike.

    PYTHONPATH=. python -m benchmarks.bench_boundary [--hard-from RUNS.jsonl] [--per-domain 5] [--budget 31]

The task set is `../shared/ipc` + `../shared/ipc-more/pairs.txt`, the `--per-domain` smallest (first) problems of
each domain, narrowed to those the raw driver does not solve within 1 s (at most `--hard-per-domain` of each
domain, the smallest first; there are ~125 such problems, too many for three 31 s arms): read from a `portfolio bench
run`
results file (`--hard-from`, e.g. made by `portfolio bench run ../shared/ipc ../shared/ipc-more/pairs.txt
--per-domain 5 --planners driver:lama-first --budget 1 --jobs 1 --out DIR`), else found here by a 1 s driver
pass. Each cascade arm is a warm `Planner` (workers started once; nothing cached between tasks: every task is
new to it) timed from `plan()` to its validated plan; the driver is `fast-downward.py --alias lama-first`, start-up
included, killed at `--budget`. Target: the carry-over cascade solves at least as many as the driver,
with median time <= 1.1x the driver's on the problems both solve.

Measured 2026-11-30 (`--hard-from` a 1 s driver pass over the 255 problems: 125 unsolved in 1 s; 27 tasks, one
per domain; 2 cores shared with three other developers, load average 12.8 at the start, 7.3 at the end):
coverage carry-over 19, no-carry-over 19, driver (31 s) 19 (carry-over and the driver solve the same 19); on
those, carry-over's median time 4.13 s vs the driver's 6.09 s, median per-task ratio 1.04x (no-carry-over:
1.25x on its 18); carry-over vs no-carry-over on the 18 both solve: median per-task ratio 0.87x. Carry-over
is slower than the driver where both run Fast Downward's search and the decomposer tier takes CPU beside it
(tetris p020 14.1 vs 9.8 s, snake p05 9.7 vs 6.1 s) and faster where the goal agenda or the race wins (citycar
p3-2-2-0-1 1.5 vs 8.9 s) or the driver's start-up counts (warm translator).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from domains.load import load_task
from portfolio.benchsuite.order import interleaved
from portfolio.benchsuite.planners import solve_with_driver
from portfolio.benchsuite.suites import benchmark_pairs
from portfolio.engine.cascade import CLASSICAL_BUDGET_S
from portfolio.planner import Planner

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
ARMS = {"carry-over": True, "no-carry-over": False}


def candidates(per_domain: int) -> list[tuple[str, Path, Path]]:
    """(key, domain file, problem file) for the benchmark's problems; keys as `portfolio bench run` writes them."""
    found = []
    for source in (SHARED / "ipc", SHARED / "ipc-more" / "pairs.txt"):
        for _, domain, problem in benchmark_pairs(source, per_domain):
            found.append((f"{problem.parent.name}/{problem.name}", domain, problem))
    return found


def hard_keys(runs: Path | None, tasks: list[tuple[str, Path, Path]]) -> set[str]:
    """The keys of the tasks the raw driver does not solve within 1 s."""
    if runs is not None:
        rows = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
        solved = {row["task"] for row in rows if row["planner"].startswith("driver") and row["status"] == "solved"}
        ran = {row["task"] for row in rows if row["planner"].startswith("driver")}
        return {key for key, _, _ in tasks if key in ran and key not in solved}
    return {
        key for key, domain, problem in tasks if not solve_with_driver(domain, problem, timeout=CLASSICAL_BUDGET_S)[0]
    }


def plan_with(planner: Planner, domain: Path, problem: Path) -> tuple[str, float, str]:
    """(status, seconds, who solved it) for one cascade run; a task the PDDL reader rejects is unsolved."""
    try:
        task = load_task(domain, problem)
    except Exception as error:
        return f"unread ({type(error).__name__})", 0.0, ""
    started = time.monotonic()
    result = planner.plan(task)
    elapsed = time.monotonic() - started
    winner = result.delegate or ""
    if result.solved and any(a.details.get("background") and a.status.value == "solved" for a in result.attempts):
        winner += " (carried over)"
    return result.status.value, elapsed, winner


def summary(rows: list[dict], budget: float) -> list[str]:
    lines = []
    names = [*ARMS, "driver"]
    coverage = {name: sum(row[name][0] == "solved" for row in rows) for name in names}
    lines.append(f"coverage of {len(rows)}: " + ", ".join(f"{n} {coverage[n]}" for n in names))
    for name in ARMS:
        both = [row for row in rows if row[name][0] == "solved" and row["driver"][0] == "solved"]
        if both:
            ratio = statistics.median(row[name][1] / row["driver"][1] for row in both)
            ours = statistics.median(row[name][1] for row in both)
            theirs = statistics.median(row["driver"][1] for row in both)
            lines.append(
                f"{name}: on the {len(both)} both solve, median {ours:.2f} s vs the driver's {theirs:.2f} s "
                f"({ours / theirs:.2f}x); median per-task ratio {ratio:.2f}x"
            )
    lines.append(f"(driver given {budget:g} s; cascade 1 s classical + {budget - 1:g} s decomposer)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--hard-from",
        type=Path,
        default=None,
        metavar="RUNS.jsonl",
        help="a `portfolio bench run` runs.jsonl with 1 s driver runs (default: run that pass here)",
    )
    parser.add_argument("--per-domain", type=int, default=5)
    parser.add_argument("--budget", type=float, default=31.0, help="seconds in all (default 31: 1 s + 30 s)")
    parser.add_argument(
        "--hard-per-domain",
        type=int,
        default=1,
        metavar="K",
        help="at most K hard tasks per domain, the smallest first (default 1: ~25 tasks x 31 s x 3 "
        "arms fits an hour; 0: all)",
    )
    args = parser.parse_args()
    tasks = candidates(args.per_domain)
    hard = hard_keys(args.hard_from, tasks)
    chosen, taken = [], {}
    for task in tasks:
        domain = task[0].split("/")[0]
        if task[0] in hard and (args.hard_per_domain <= 0 or taken.get(domain, 0) < args.hard_per_domain):
            taken[domain] = taken.get(domain, 0) + 1
            chosen.append(task)
    print(
        f"{len(chosen)} tasks the driver does not solve in 1 s; cores {len(os.sched_getaffinity(0))}, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    decomposer = args.budget - CLASSICAL_BUDGET_S
    planners = {name: Planner(budget_s=CLASSICAL_BUDGET_S, carry_over=carry) for name, carry in ARMS.items()}
    for planner in planners.values():
        for stage in planner.cascade.delegates:
            if stage.name == "decomposer":
                stage.budget_s = decomposer
    rows = []
    try:
        time.sleep(3)  # workers finish importing
        print(f"{'task':55} {'driver':>12} {'carry-over':>30} {'no-carry-over':>30}", flush=True)
        # rotated: each arm goes first on a third of the tasks
        for _, (key, domain, problem), order in interleaved(chosen, [*ARMS, "driver"], rotate=True):
            row: dict = {"task": key}
            for name in order:
                if name == "driver":
                    ok, elapsed = solve_with_driver(domain, problem, timeout=args.budget)
                    row["driver"] = ("solved" if ok else "no plan", elapsed, "")
                else:
                    row[name] = plan_with(planners[name], domain, problem)
            rows.append(row)
            cells = [f"{row[n][0][:7]} {row[n][1]:5.1f}s {row[n][2][:14]}" for n in ("driver", *ARMS)]
            print(f"{key:55} {cells[0]:>12} {cells[1]:>30} {cells[2]:>30}", flush=True)
    finally:
        for planner in planners.values():
            planner.close()
    for line in summary(rows, args.budget):
        print(line)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
