"""How many tasks any arrangement of this planner's parts could solve within the budget: an upper bound.

    PYTHONPATH=. python -m benchmarks.experiments.coverage_bound [--per-domain 5] [--budget 1] [--timeout 3]
                                                                [--out ROWS.jsonl] [SOURCE ...]

SOURCE is a benchmark folder or a pairs.txt (default: ../shared/ipc and ../shared/ipc-more/pairs.txt, the
coverage set). For every task, each translator arm (`ARMS`) translates it in the one warm translator worker, one
task after another as the delegate's worker would: with the driver's default flags, and with the translator flags
that skip work (`SKIP`, learned per domain, never a default). Then, for every arm whose translation ended within
the budget, each satisficing search this planner runs (`SEARCHES`) is run alone on that arm's SAS text, with the
whole machine to itself. A translation past `--timeout` (3 s) counts as none. A task counts when some arm's
translation plus some search's time fits the budget: no process start-up, no parse, no validation, no sharing of
the two cores. No real call can beat that, so the count bounds the coverage of every schedule of this translator
and these searches, and a target above it needs a faster translator (or other searches), not a better
portfolio.

Prints one line per task (the best arm and search, or what was missing), then per domain the bound and the
tasks it leaves out, and the total. `--out` keeps every measurement as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from portfolio.benchsuite.suites import benchmark_pairs
from portfolio.delegates.fast_downward import translate as translate_worker
from portfolio.delegates.fast_downward.searches import RACE_ALIASES, SEARCH_ALIASES, search_binary
from portfolio.engine.workers import WorkerProcess

DEFAULT_SOURCES = (Path("../shared/ipc"), Path("../shared/ipc-more/pairs.txt"))
SKIP = ("--keep-unreachable-facts", "--skip-variable-reordering")  # `benchmarks.bench_translate_options`
SEARCHES = ("lama-first", *RACE_ALIASES)
# (name, translator flags)
ARMS = (("cpython", ()), ("cpython-skip", SKIP))


@dataclass
class Row:
    task: str
    domain: str
    translate_s: dict[str, float | None] = field(default_factory=dict)  # arm -> wall seconds (None: none in time)
    search_s: dict[str, float | None] = field(default_factory=dict)  # "arm/search" -> wall seconds
    best: tuple[float, str] | None = None  # (translate + search seconds, "arm/search") of the fastest pair

    def within(self, budget_s: float) -> bool:
        return self.best is not None and self.best[0] <= budget_s


def translate(worker: WorkerProcess, domain: Path, problem: Path, options: tuple[str, ...], timeout_s: float):
    """(SAS text, wall seconds) of one translation by a warm worker, or (None, None). A ping first, so a worker
    restarted after a timeout has started and imported before the clock does."""
    worker.call("ping", time.monotonic() + 30)
    start = time.monotonic()
    try:
        message = worker.call(
            translate_worker.TRANSLATE_OP,
            start + timeout_s,
            domain_pddl=domain.read_text(errors="replace"),
            problem_pddl=problem.read_text(errors="replace"),
            options=options,
        )
    except Exception:  # a timeout, a translator error, memory: no translation within the timeout
        return None, None
    return message["sas"], time.monotonic() - start


def search(sas: str, alias: str, timeout_s: float) -> float | None:
    """Wall seconds of Fast Downward's search `alias` on `sas` to a plan, alone; None if none within the timeout."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.monotonic()
        try:
            process = subprocess.run(
                [str(search_binary()), "--search", SEARCH_ALIASES[alias]],
                input=sas,
                text=True,
                cwd=folder,
                capture_output=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return None
        elapsed = time.monotonic() - start
        return elapsed if process.returncode == 0 and (Path(folder) / "sas_plan").exists() else None


def measure(label: str, domain: Path, problem: Path, worker: WorkerProcess, budget_s: float, timeout_s: float) -> Row:
    """Every arm's translation of the task by `worker` (a translator worker), and each search on every
    translation that fit `budget_s`."""
    row = Row(f"{label}/{problem.name}", label)
    for arm, options in ARMS:
        sas, seconds = translate(worker, domain, problem, options, timeout_s)
        row.translate_s[arm] = seconds
        if sas is None or seconds is None or seconds >= budget_s:
            continue
        for alias in SEARCHES:
            found = search(sas, alias, max(budget_s - seconds, 0.0) + 1.0)  # a little past: for the record
            row.search_s[f"{arm}/{alias}"] = found
            if found is not None and (row.best is None or seconds + found < row.best[0]):
                row.best = (seconds + found, f"{arm}/{alias}")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="*", type=Path, default=list(DEFAULT_SOURCES))
    parser.add_argument("--per-domain", type=int, default=5, help="problems per domain (default 5)")
    parser.add_argument("--budget", type=float, default=1.0, help="the budget bounded, seconds (default 1)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per translation (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="write every row as a JSON line here")
    args = parser.parse_args()
    pairs = [p for source in args.sources for p in benchmark_pairs(source, args.per_domain)]
    worker = WorkerProcess(preload=translate_worker.PRELOAD)  # killed at a timeout, as the delegate's is
    rows: list[Row] = []
    try:
        for label, domain, problem in pairs:
            row = measure(label, domain, problem, worker, args.budget, args.timeout)
            rows.append(row)
            best = "none" if row.best is None else f"{row.best[0]:.2f} s ({row.best[1]})"
            print(f"{row.task:<60} {best}", flush=True)
            if args.out is not None:
                with args.out.open("a") as out:
                    out.write(json.dumps(row.__dict__) + "\n")
    finally:
        worker.close()
    by_domain: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_domain[row.domain].append(row)
    print(f"\nper domain: tasks whose fastest translation + search fits {args.budget:g} s, of those measured")
    for label, domain_rows in by_domain.items():
        inside = sum(row.within(args.budget) for row in domain_rows)
        print(f"  {label:<40} {inside} of {len(domain_rows)}")
    total = sum(row.within(args.budget) for row in rows)
    print(f"bound: {total} of {len(rows)} tasks within {args.budget:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
