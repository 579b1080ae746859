"""The warm translator workers' SAS output against the raw driver's `--translate` output, task by task.

    PYTHONPATH=. python -m benchmarks.experiments.sas_compare [--per-domain 1] [SOURCE ...]

SOURCE is a benchmark folder or a pairs.txt (default: ../shared/ipc and ../shared/ipc-more/pairs.txt). Every
task is translated by one warm worker process (the same `WorkerProcess` the Fast Downward delegate uses, so tasks
run one after another in one translator and any global state it leaks would show) and by a fresh
`fast-downward.py --translate`; the two SAS texts must be byte-identical. Prints one line per task (the verdict
and the worker's CPU seconds) and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from portfolio.benchsuite.planners import driver_translate
from portfolio.benchsuite.suites import benchmark_pairs
from portfolio.delegates.fast_downward import translate as translate_worker
from portfolio.engine.workers import WorkerProcess

DEFAULT_SOURCES = (Path("../shared/ipc"), Path("../shared/ipc-more/pairs.txt"))


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def translate_with(
    worker: WorkerProcess, domain: Path, problem: Path, timeout_s: float
) -> tuple[str | None, str, float]:
    """(SAS text or None, why none, CPU seconds) of one translation by a warm worker."""
    pid = worker.pid
    before = cpu_seconds(pid)
    try:
        sas = worker.call(
            translate_worker.TRANSLATE_OP,
            time.monotonic() + timeout_s,
            domain_pddl=domain.read_text(errors="replace"),
            problem_pddl=problem.read_text(errors="replace"),
        )["sas"]
    except Exception as error:
        return None, f"worker: {type(error).__name__}: {str(error)[:120]}", 0.0
    return sas, "", cpu_seconds(pid) - before


def compare(pairs: list[tuple[str, Path, Path]], timeout_s: float = 120.0) -> Iterator[tuple[str, str, float]]:
    """(task, verdict, the worker's CPU s) per pair, as each is done: verdict 'same', 'DIFFERENT', or why one
    side produced nothing."""
    worker = WorkerProcess(preload=translate_worker.PRELOAD)
    try:
        for label, domain, problem in pairs:
            name = f"{label}/{problem.name}"
            sas, why, seconds = translate_with(worker, domain, problem, timeout_s)
            theirs = driver_translate(domain, problem, timeout=timeout_s)
            if sas is None:
                yield name, why, seconds
            elif theirs is None:
                yield name, "driver produced no SAS file", seconds
            else:
                yield name, "same" if sas == theirs else "DIFFERENT", seconds
    finally:
        worker.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="*", type=Path, default=list(DEFAULT_SOURCES))
    parser.add_argument("--per-domain", type=int, default=1, help="problems per domain (default 1)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per translation (default 120)")
    args = parser.parse_args()
    pairs = [p for source in args.sources for p in benchmark_pairs(source, args.per_domain)]
    verdicts = []
    for name, verdict, seconds in compare(pairs, args.timeout):
        print(f"{name:<60} {verdict}  {seconds:7.2f} s", flush=True)
        verdicts.append(verdict)
    bad = [v for v in verdicts if v != "same"]
    print(f"{len(verdicts) - len(bad)} of {len(verdicts)} identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
