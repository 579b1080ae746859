"""The warm translator workers' SAS output against the raw driver's `--translate` output, task by task.

    PYTHONPATH=. python -m benchmarks.experiments.sas_compare [--per-domain 1] [--python pypy3] [SOURCE ...]

SOURCE is a benchmark folder or a pairs.txt (default: ../shared/ipc and ../shared/ipc-more/pairs.txt). Every
task is translated by one warm worker process (the same `WorkerProcess` the Fast Downward delegate uses, so tasks
run one after another in one translator and any global state it leaks would show) and by a fresh
`fast-downward.py --translate`; the two SAS texts must be byte-identical. With `--python`, a second warm worker
under that interpreter (the translator race's, `portfolio.delegates.fast_downward.translators`) translates every
task too, must match as well, and both workers' CPU seconds per task are printed, with the ratio over the ten
tasks CPython took longest on. Prints one line per task and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from portfolio.benchsuite.planners import driver_translate
from portfolio.benchsuite.suites import benchmark_pairs
from portfolio.delegates.fast_downward import translate as translate_worker
from portfolio.delegates.fast_downward.translators import worker_env
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


def compare(
    pairs: list[tuple[str, Path, Path]], timeout_s: float = 120.0, python: str | None = None
) -> Iterator[tuple[str, str, float, float | None]]:
    """(task, verdict, CPython CPU s, second interpreter's CPU s) per pair, as each is done: verdict 'same',
    'DIFFERENT' (which side differs), or why one side produced nothing."""
    workers = [WorkerProcess(preload=translate_worker.PRELOAD)]
    if python is not None:
        env = worker_env()
        workers.append(WorkerProcess(preload=translate_worker.PRELOAD, python=python, env=env))
    try:
        for label, domain, problem in pairs:
            name = f"{label}/{problem.name}"
            ours = [translate_with(worker, domain, problem, timeout_s) for worker in workers]
            seconds = [cpu for _, _, cpu in ours]
            theirs = driver_translate(domain, problem, timeout=timeout_s)
            second = seconds[1] if len(seconds) > 1 else None
            missing = [why for sas, why, _ in ours if sas is None]
            if missing:
                yield name, "; ".join(missing), seconds[0], second
            elif theirs is None:
                yield name, "driver produced no SAS file", seconds[0], second
            else:
                differ = [label for (sas, _, _), label in zip(ours, ("cpython", python)) if sas != theirs]
                yield name, "same" if not differ else "DIFFERENT: " + ", ".join(map(str, differ)), seconds[0], second
    finally:
        for worker in workers:
            worker.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="*", type=Path, default=list(DEFAULT_SOURCES))
    parser.add_argument("--per-domain", type=int, default=1, help="problems per domain (default 1)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per translation (default 120)")
    parser.add_argument("--python", default=None, help="a second interpreter to translate with (e.g. pypy3)")
    args = parser.parse_args()
    pairs = [p for source in args.sources for p in benchmark_pairs(source, args.per_domain)]
    verdicts = []
    for name, verdict, cpython_s, second_s in compare(pairs, args.timeout, args.python):
        timing = f"  {cpython_s:7.2f} s" + ("" if second_s is None else f"  {second_s:7.2f} s")
        print(f"{name:<60} {verdict}{timing}", flush=True)
        verdicts.append((name, verdict, cpython_s, second_s))
    bad = [v for v in verdicts if v[1] != "same"]
    print(f"{len(verdicts) - len(bad)} of {len(verdicts)} identical")
    if args.python:
        done = sorted((v for v in verdicts if v[1] == "same"), key=lambda v: v[2], reverse=True)[:10]
        if done:
            ratios = [v[3] / v[2] for v in done if v[2] > 0 and v[3] is not None]
            total = sum(v[3] or 0.0 for v in done) / sum(v[2] for v in done)
            print(
                f"the ten slowest under CPython: {args.python} CPU / CPython CPU = {total:.2f} in total, "
                f"median {statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
