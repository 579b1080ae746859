"""Coverage of the cascade with and without the non-LLM decomposer tier on ../shared/ipc/.

One cascade per task: the classical tier (Fast Downward, pyperplan; 1 s together), then the decomposer tier
(goal-agenda; 30 s). "Without the decomposer" is what the classical tier solved on its own in the same run;
"with" adds what the decomposer tier solved after it. Every plan counted was validated by the cascade, and is
validated again here.

Run as a script (minutes; prints a table and writes JSON):

    .venv/bin/python benchmarks/bench_decomposer.py                       # 10 smallest problems per domain
    .venv/bin/python benchmarks/bench_decomposer.py --set all --out coverage.json
    .venv/bin/python benchmarks/bench_decomposer.py --domains parking-sat11-strips,barman-sat11-strips

`make bench` runs the pytest-benchmark entry below, on the classical tier's misses among the 3 smallest
problems of the domains where it misses most (barman, parking).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from domains.load import load_task
from domains.validate import validate_plan
from portfolio.delegates.registry import build_stages
from portfolio.planner import Planner

ROOT = Path(__file__).resolve().parents[1]

IPC = ROOT.parent / "shared" / "ipc"


def problems(domain: str, count: int | None) -> list[Path]:
    """The `count` smallest problem files of a domain (by size), all when `count` is None."""
    found = [p for p in (IPC / domain).glob("*.pddl") if p.name != "domain.pddl"]
    ordered = sorted(found, key=lambda p: (p.stat().st_size, p.name))
    return ordered if count is None else ordered[:count]


def measure(
    domains: list[str], count: int | None, classical_s: float, decomposer_s: float, decomposers: list[str], log=print
) -> list[dict]:
    """One row per task: which tier solved it (classical, decomposer or none) and how long it took."""
    names = ["fast-downward", "pyperplan", *decomposers]
    stages = build_stages(names, budget_s=classical_s, decomposer_budget_s=decomposer_s)
    rows = []
    with Planner(stages) as planner:
        for domain in domains:
            for problem in problems(domain, count):
                task = load_task(IPC / domain / "domain.pddl", problem)
                started = time.monotonic()
                result = planner.plan(task)
                elapsed = time.monotonic() - started
                tier = "none"
                if result.solved:
                    assert validate_plan(task, result.actions()).ok, (domain, problem.name)
                    tier = "decomposer" if result.delegate in decomposers else "classical"
                method = next(
                    (
                        a.details.get("method", "")
                        for a in result.attempts
                        if a.delegate in decomposers and a.status.value == "solved"
                    ),
                    "",
                )
                rows.append(
                    {
                        "domain": domain,
                        "problem": problem.name,
                        "tier": tier,
                        "delegate": result.delegate,
                        "method": method,
                        "seconds": round(elapsed, 2),
                        "steps": len(result.plan),
                    }
                )
                log(f"{domain:24} {problem.name:24} {tier:10} {method:9} {elapsed:6.2f} s")
    return rows


def summary(rows: list[dict]) -> str:
    by_domain: dict[str, Counter] = {}
    for row in rows:
        by_domain.setdefault(row["domain"], Counter())[row["tier"]] += 1
    lines = [f"{'domain':24} {'tasks':>5} {'classical':>9} {'+decomp':>8}"]
    total = Counter()
    for domain, counts in by_domain.items():
        n = sum(counts.values())
        total.update(counts)
        lines.append(f"{domain:24} {n:5} {counts['classical']:9} {counts['classical'] + counts['decomposer']:8}")
    n = sum(total.values())
    lines.append(f"{'total':24} {n:5} {total['classical']:9} {total['classical'] + total['decomposer']:8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=("smallest10", "all"), default="smallest10")
    parser.add_argument("--domains", default=None, help="comma-separated IPC folders (default: all)")
    parser.add_argument("--classical-budget", type=float, default=1.0)
    parser.add_argument("--decomposer-budget", type=float, default=30.0)
    parser.add_argument("--decomposers", default="goal-agenda", help="decomposer-tier delegates (default goal-agenda)")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    domains = (
        args.domains.split(",")
        if args.domains
        else sorted(p.name for p in IPC.iterdir() if (p / "domain.pddl").exists())
    )
    rows = measure(
        domains,
        10 if args.set == "smallest10" else None,
        args.classical_budget,
        args.decomposer_budget,
        [d for d in args.decomposers.split(",") if d],
    )
    print(summary(rows))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


def test_decomposer_tier_adds_coverage(benchmark):
    """pytest-benchmark entry (`make bench`): the hard-for-1-s domains, 3 smallest problems each."""
    rows = benchmark.pedantic(
        measure,
        args=(["barman-sat11-strips", "parking-sat11-strips"], 3, 1.0, 30.0, ["goal-agenda"]),
        kwargs={"log": lambda *a: None},
        rounds=1,
        iterations=1,
    )
    counts = Counter(row["tier"] for row in rows)
    benchmark.extra_info.update(counts)
    assert counts["decomposer"] > 0


if __name__ == "__main__":
    sys.exit(main())
