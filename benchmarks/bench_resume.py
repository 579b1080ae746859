"""1,000 runs of `portfolio bench run`, the runner killed with SIGKILL half-way, resumed: none lost, none repeated.

The experiment is cheap on purpose (the in-process typed-search delegate on generated blocksworld tasks of 1-5
blocks, 200 seeds each), so what is measured is the tool: a run process per run, the JSON-lines file, resume.

    python benchmarks/bench_resume.py                    # 1,000 runs, kill -9 after 500 are written
    python benchmarks/bench_resume.py --seeds 20 --kill-after 40

Prints the runs written before the kill, the runs the resume ran, whether every run is in the file exactly
once, whether any run process outlived the killed runner, and the throughput (runs/s) of both phases.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import psutil

from portfolio.benchsuite.store import read_runs, runs_path

ROOT = Path(__file__).resolve().parents[1]


def live_marked(marker: str) -> int:
    """How many live processes carry `marker` in their environment (every process a run starts inherits it)."""
    count = 0
    for process in psutil.process_iter():
        try:
            if any(marker in f"{name}={value}" for name, value in process.environ().items()):
                count += process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:  # ended meanwhile, or not ours to read
            pass
    return count


def bench_run_command(suite: str, out: Path, jobs: int) -> list[str]:
    """`portfolio bench run SUITE` of the in-process typed-search delegate into `out` with `jobs` run processes,
    no progress bar: the command killed and run again (tests/test_bench_run.py runs it too)."""
    command = ["portfolio.cli", "bench", "run", suite, "--planners", "typed-search", "--out", str(out)]
    return [sys.executable, "-m", *command, "--jobs", str(jobs), "--no-progress"]


def measure(seeds: int = 200, kill_after: int = 500, jobs: int = 2, out: Path | None = None) -> dict:
    out = out or Path(tempfile.mkdtemp(prefix="bench-resume-"))
    marker = uuid.uuid4().hex
    command = bench_run_command(f"gen:blocksworld:sizes=1..5:seeds=0..{seeds - 1}", out, jobs)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PORTFOLIO_BENCH_MARK=marker)
    path = runs_path(out)
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    while process.poll() is None and (not path.exists() or path.read_bytes().count(b"\n") < kill_after):
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    first_s = time.monotonic() - started
    time.sleep(2.0)
    left_behind = live_marked(marker)
    before = len(read_runs(path))
    started = time.monotonic()
    resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    resume_s = time.monotonic() - started
    ids = Counter(record["run_id"] for record in read_runs(path))
    total = 5 * seeds
    return {
        "total": total,
        "written_before_kill": before,
        "resume_output": resumed.stdout.splitlines()[0],
        "in_file": sum(ids.values()),
        "distinct": len(ids),
        "repeated": sum(c > 1 for c in ids.values()),
        "lost": total - len(ids),
        "left_behind_after_kill": left_behind,
        "runs_per_s_before_kill": round(before / first_s, 2),
        "runs_per_s_resume": round((total - before) / resume_s, 2),
        "out": str(out),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200, help="seeds per size (5 sizes; default 200: 1,000 runs)")
    parser.add_argument("--kill-after", type=int, default=500, help="SIGKILL the runner once this many are written")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    result = measure(args.seeds, args.kill_after, args.jobs)
    print(json.dumps(result, indent=1))
    return 0 if result["lost"] == result["repeated"] == result["left_behind_after_kill"] == 0 else 1


def test_resume_after_kill_9(benchmark):
    """pytest-benchmark entry (`make bench`): the whole kill-and-resume once."""
    result = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    assert result["lost"] == result["repeated"] == result["left_behind_after_kill"] == 0


if __name__ == "__main__":
    sys.exit(main())
