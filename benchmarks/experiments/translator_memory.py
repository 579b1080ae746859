"""Peak memory of a translation, task by task.

    PYTHONPATH=. python -m benchmarks.experiments.translator_memory [--per-domain 5] [SOURCE ...]

SOURCE is a benchmark folder or a pairs.txt (default: ../shared/ipc and ../shared/ipc-more/pairs.txt); of each
domain's `--per-domain` tasks (the coverage set's), the largest problem file is translated. Each translation runs
in a fresh translator worker (the `WorkerProcess` the Fast Downward delegate uses), so the process's high-water
marks are the task's own: `VmPeak` (address space, what the RLIMIT_AS cap of `portfolio.engine.limits` counts) and
`VmHWM` (resident). Prints one line per task, then the median and the cap the largest task would need.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from portfolio.benchsuite.suites import benchmark_pairs
from portfolio.delegates.fast_downward import translate as translate_worker
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


def translate_peaks(domain: Path, problem: Path, timeout_s: float) -> tuple[float, float] | str:
    """The (VmPeak, VmHWM) of a fresh translator worker that translated the task, or why it did not."""
    worker = WorkerProcess(preload=translate_worker.PRELOAD)
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
    args = parser.parse_args()
    pairs = largest_per_domain([p for source in args.sources for p in benchmark_pairs(source, args.per_domain)])
    peaks = []
    print(f"{'task':<58} {'peak/rss MB':>16}")
    for label, domain, problem in pairs:
        found = translate_peaks(domain, problem, args.timeout)
        shown = f"{found[0]:7.0f} / {found[1]:5.0f}" if isinstance(found, tuple) else found
        print(f"{label + '/' + problem.name:<58} {shown:>16}", flush=True)
        if isinstance(found, tuple):
            peaks.append(found[0])
    if peaks:
        print(
            f"{len(peaks)} tasks: address-space peak median {statistics.median(peaks):.0f} MB "
            f"[{min(peaks):.0f}, {max(peaks):.0f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
