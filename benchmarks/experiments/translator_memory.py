"""Peak memory of a translation under CPython and under PyPy, task by task.

    PYTHONPATH=. python -m benchmarks.experiments.translator_memory [--per-domain 5] [--python pypy3] [SOURCE ...]

SOURCE is a benchmark folder or a pairs.txt (default: ../shared/ipc and ../shared/ipc-more/pairs.txt); of each
domain's `--per-domain` tasks (the coverage set's), the largest problem file is translated. Each translation runs
in a fresh translator worker of each interpreter (the `WorkerProcess` the Fast Downward delegate uses, with the
race's environment for PyPy), so the process's high-water marks are the task's own: `VmPeak` (address space, what
the RLIMIT_AS cap of `portfolio.engine.limits` counts) and `VmHWM` (resident). A fresh PyPy is a cold one: its JIT
has compiled less than a warm worker's, so its peak here is a lower bound of a warm worker's by the JIT's code.
Prints one line per task, then the ratios and the cap each interpreter would need for the largest task.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from portfolio.benchsuite.suites import benchmark_pairs
from portfolio.delegates.fast_downward import translate as translate_worker
from portfolio.delegates.fast_downward.translators import find_python, worker_env
from portfolio.engine.workers import WorkerProcess

DEFAULT_SOURCES = (Path("../shared/ipc"), Path("../shared/ipc-more/pairs.txt"))


def peaks_mb(pid: int | None) -> tuple[float, float]:
    """(VmPeak, VmHWM) of a live process in MB, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmPeak", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmPeak"], fields["VmHWM"]


def translate_peaks(python: str | None, domain: Path, problem: Path, timeout_s: float) -> tuple[float, float] | str:
    """The (VmPeak, VmHWM) of a fresh worker of `python` (None: this interpreter) that translated the task, or
    why it did not."""
    worker = WorkerProcess(
        preload=translate_worker.PRELOAD, python=python, env=None if python is None else worker_env()
    )
    try:
        worker.call(
            translate_worker.TRANSLATE_OP,
            time.monotonic() + timeout_s,
            domain_pddl=domain.read_text(errors="replace"),
            problem_pddl=problem.read_text(errors="replace"),
        )
        return peaks_mb(worker.pid)
    except Exception as error:
        return f"{type(error).__name__}: {str(error)[:80]}"
    finally:
        worker.close()


def largest_per_domain(pairs: list[tuple[str, Path, Path]]) -> list[tuple[str, Path, Path]]:
    """Of each domain's pairs, the one with the largest problem file."""
    chosen: dict[str, tuple[str, Path, Path]] = {}
    for pair in pairs:
        best = chosen.get(pair[0])
        if best is None or pair[2].stat().st_size > best[2].stat().st_size:
            chosen[pair[0]] = pair
    return list(chosen.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="*", type=Path, default=list(DEFAULT_SOURCES))
    parser.add_argument("--per-domain", type=int, default=5, help="the coverage set's tasks per domain (default 5)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per translation (default 120)")
    parser.add_argument("--python", default="pypy3", help="the second interpreter (default pypy3)")
    args = parser.parse_args()
    second = find_python(args.python)
    if second is None:
        print(f"{args.python}: not found", file=sys.stderr)
        return 2
    pairs = largest_per_domain([p for source in args.sources for p in benchmark_pairs(source, args.per_domain)])
    rows = []
    print(f"{'task':<58} {'CPython peak/rss MB':>20} {'PyPy peak/rss MB':>18}")
    for label, domain, problem in pairs:
        ours = translate_peaks(None, domain, problem, args.timeout)
        theirs = translate_peaks(second, domain, problem, args.timeout)
        shown = [f"{v[0]:7.0f} / {v[1]:5.0f}" if isinstance(v, tuple) else v for v in (ours, theirs)]
        print(f"{label + '/' + problem.name:<58} {shown[0]:>20} {shown[1]:>18}", flush=True)
        if isinstance(ours, tuple) and isinstance(theirs, tuple):
            rows.append((ours, theirs))
    if rows:
        peak = [t[0] / o[0] for o, t in rows]
        extra = [t[0] - o[0] for o, t in rows]
        print(
            f"{len(rows)} tasks: PyPy / CPython address-space peak median {statistics.median(peak):.2f} "
            f"[{min(peak):.2f}, {max(peak):.2f}], PyPy's extra median {statistics.median(extra):.0f} MB "
            f"[{min(extra):.0f}, {max(extra):.0f}]; largest peaks: CPython {max(o[0] for o, _ in rows):.0f} MB, "
            f"PyPy {max(t[0] for _, t in rows):.0f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
