"""The portfolio against UP's Fast Downward, both through unified-planning's factory, side by side in one run.

    python benchmarks/up_engines.py [SUITE] [--per-domain 3] [--timeout 5] [--out results/up_engines.jsonl]

SUITE (default `../shared/ipc`, held out: the tests never read it) is a folder of domain folders, each with a
`domain.pddl` and problems; the `--per-domain` smallest problems of each (by file size) are read by UP's
`PDDLReader` (a problem it cannot read is counted, not run) and solved, task by task, by
`OneshotPlanner(name="portfolio")` and `OneshotPlanner(name="fast-downward")`, each made once beforehand (warm),
with the same `timeout`. A plan counts when UP's `sequential_plan_validator` accepts it. Latency is the `solve`
call's wall time, failures included. Prints a markdown table (coverage, median and p95 latency per engine, and
coverage per domain); `--out` also writes one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ENGINES = ("portfolio", "fast-downward")
SOLVED = ("SOLVED_SATISFICING", "SOLVED_OPTIMALLY")

log = logging.getLogger("benchmarks.up_engines")


def smallest(suite: Path, per_domain: int) -> list[tuple[str, Path, Path]]:
    """(domain, domain file, problem file) for the `per_domain` smallest problems of each domain folder."""
    found = []
    for folder in sorted(p for p in suite.iterdir() if (p / "domain.pddl").is_file()):
        problems = [p for p in folder.glob("*.pddl") if p.name != "domain.pddl" and "domain" not in p.name]
        for problem in sorted(problems, key=lambda p: (p.stat().st_size, p.name))[:per_domain]:
            found.append((folder.name, folder / "domain.pddl", problem))
    return found


def run(suite: Path, per_domain: int, timeout: float) -> list[dict[str, Any]]:
    """One record per (task, engine): status, valid, seconds; plus one per task UP could not read."""
    from unified_planning.io import PDDLReader
    from unified_planning.shortcuts import OneshotPlanner, PlanValidator, get_environment

    import portfolio.up  # noqa: F401  (registers the portfolio engine)

    get_environment().credits_stream = None
    get_environment().error_used_name = False  # PDDL lets an action and an object share a name
    records: list[dict[str, Any]] = []
    planners = {name: OneshotPlanner(name=name) for name in ENGINES}
    try:
        with PlanValidator(name="sequential_plan_validator") as validator:
            validator.skip_checks = True  # UP's kind check refuses static cost fluents its simulator evaluates
            for domain, domain_file, problem_file in smallest(suite, per_domain):
                task = f"{domain}/{problem_file.name}"
                try:
                    problem = PDDLReader().parse_problem(str(domain_file), str(problem_file))
                except Exception as error:
                    records.append({"task": task, "domain": domain, "engine": None, "unreadable": str(error)[:200]})
                    continue
                for name, planner in planners.items():
                    start = time.monotonic()
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            result = planner.solve(problem, timeout=timeout)
                        status = result.status.name
                    except Exception as error:  # UP's engines raise for what they refuse
                        result, status = None, f"exception: {type(error).__name__}"
                    seconds = time.monotonic() - start
                    valid = False
                    if result is not None and result.plan is not None:
                        valid = validator.validate(problem, result.plan).status.name == "VALID"
                    record = {"task": task, "domain": domain, "engine": name, "status": status}
                    record |= {"valid": valid, "seconds": round(seconds, 4)}
                    records.append(record)
                    log.info("%s %s %s %.3f s", task, name, status, seconds)
    finally:
        for planner in planners.values():
            planner.destroy()
    return records


def report(records: list[dict[str, Any]], timeout: float) -> str:
    """The markdown table of coverage and latency per engine, then coverage per domain."""
    runs = [r for r in records if r["engine"]]
    tasks = sorted({r["task"] for r in runs})
    unreadable = [r["task"] for r in records if not r["engine"]]
    lines = [
        f"{len(tasks)} tasks read by UP ({len(unreadable)} it could not read), timeout {timeout:g} s",
        "",
        "| engine | solved (valid) | median s | p95 s |",
        "|---|---|---|---|",
    ]
    for name in ENGINES:
        mine = [r for r in runs if r["engine"] == name]
        solved = sum(1 for r in mine if r["status"] in SOLVED and r["valid"])
        seconds = sorted(r["seconds"] for r in mine)
        p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))] if seconds else float("nan")
        median = statistics.median(seconds) if seconds else float("nan")
        lines.append(f"| {name} | {solved}/{len(mine)} | {median:.3f} | {p95:.3f} |")
    lines += ["", "| domain | " + " | ".join(ENGINES) + " |", "|---" * (len(ENGINES) + 1) + "|"]
    for domain in sorted({r["domain"] for r in runs}):
        cells = []
        for name in ENGINES:
            mine = [r for r in runs if r["engine"] == name and r["domain"] == domain]
            cells.append(f"{sum(1 for r in mine if r['status'] in SOLVED and r['valid'])}/{len(mine)}")
        lines.append(f"| {domain} | " + " | ".join(cells) + " |")
    if unreadable:
        lines += ["", "Not read by UP: " + ", ".join(unreadable)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", nargs="?", default="../shared/ipc", help="a folder of domain folders")
    parser.add_argument("--per-domain", type=int, default=3, help="the K smallest problems of each domain")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per solve, for both engines")
    parser.add_argument("--out", type=Path, help="also write one JSON line per run here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    suite = Path(args.suite)
    if not suite.is_dir():
        print(f"error: no such folder: {suite}", file=sys.stderr)
        return 2
    records = run(suite, args.per_domain, args.timeout)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    print(report(records, args.timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
