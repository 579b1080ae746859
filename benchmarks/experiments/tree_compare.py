"""The SQLite path of two checkouts side by side: is one slower than the other? Three measurements, each taken in
processes that import the checkout under test (PYTHONPATH first: the venv's editable install comes after it), in
interleaved rounds (A, B, A, B, ...) so that the machine's load falls on both alike:

- `record_steps`: 100,000 steps in batches of 5,000 into a fresh SQLite file, steps per second of wall time and of
  the process's CPU time.
- step POST: p50/p99 of one-step `POST /v1/steps`, sent one after another on one keep-alive connection to
  `portfolio serve --workers 1 --traces FILE --insecure` (after a warm-up).
- plan: p50/p99 of `POST /v1/plan` (blocks, 4 blocks) to the same server, warm, run id given so that the plan is
  recorded in the store (what `--traces` adds to a plan).

    python -m benchmarks.experiments.tree_compare /work/before /work/after --rounds 3

Each round prints one JSON line per checkout; the summary is the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from portfolio.benchsuite.report import percentile

REPO = Path(__file__).resolve().parents[2]
BLOCKS = REPO / "tests" / "data" / "ipc" / "blocks"

# run in a child process with the checkout first on sys.path
RECORD = """
import sys, tempfile, time
from pathlib import Path
import traces
from traces import StepRecord, TraceStore
assert traces.__file__.startswith(sys.argv[1]), f"imported {traces.__file__}, not the checkout's"
records = [StepRecord(run_id="r", step=i, action=("drive", "fly", "load")[i % 3], args=(f"o{i % 40}", f"o{i % 7}"),
                      outcome="failure" if i % 10 == 0 else "success", duration_ms=5.0, features={"weather": "rain"})
           for i in range(100_000)]
with tempfile.TemporaryDirectory() as scratch:
    with TraceStore(Path(scratch) / "t.db") as store:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(records), 5000):
            store.record_steps(records[i : i + 5000])
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
print(round(len(records) / took), round(len(records) / cpu))
"""


def child_env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def record_rate(tree: Path) -> tuple[int, int]:
    """Steps recorded per second of wall time, and of the process's CPU time (less sensitive to the machine's
    other load)."""
    done = subprocess.run(
        [sys.executable, "-c", RECORD, str(tree.resolve())],
        cwd=tree,
        env=child_env(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = done.stdout.split()[-2:]
    return int(wall), int(cpu)


def percentiles(latencies: list[float]) -> dict[str, float]:
    return {f"p{q}_ms": round(percentile(latencies, q) * 1000, 2) for q in (50, 99)}


def service(tree: Path, posts: int, plans: int) -> dict[str, dict[str, float]]:
    """Step POST and plan latencies of the checkout's `portfolio serve` with a trace store in a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="tree-compare-") as scratch:
        command = [
            sys.executable, "-m", "portfolio.cli", "serve", "--port", "0", "--workers", "1", "--insecure",
            "--delegates", "fast-downward,pyperplan", "--rps", "100000", "--max-concurrent-plans", "1000",
            "--traces", str(Path(scratch) / "traces.db"),
        ]  # fmt: skip
        process = subprocess.Popen(
            command, cwd=tree, env=child_env(tree), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            url = line.split()[2].removesuffix("/v1/")
            with httpx.Client(base_url=url, timeout=60) as http:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:  # every planner worker started
                    health = http.get("/v1/health").json()
                    if health["ready"] == health["workers"]:
                        break
                    time.sleep(0.1)
                body = {"domain": (BLOCKS / "domain.pddl").read_text(),
                        "problem": (BLOCKS / "probBLOCKS-4-0.pddl").read_text()}  # fmt: skip
                results = {}

                def step(i: int) -> httpx.Response:
                    run = "warm" if i < 0 else "compare"  # the warm-up's steps are numbered -1, -2, ...
                    one = {"run_id": run, "step": abs(i), "action": "(pick-up b)", "outcome": "success"}
                    return http.post("/v1/steps", json={"steps": [one]})

                def plan(i: int) -> httpx.Response:
                    return http.post("/v1/plan", json={**body, "run_id": f"plan-{i}"})

                for name, send, count in (("steps", step, posts), ("plan", plan, plans)):
                    for i in range(20):  # warm: the connection, the worker's translation cache, the store
                        send(-1 - i).raise_for_status()
                    latencies = []
                    for i in range(count):
                        began = time.perf_counter()
                        send(i).raise_for_status()
                        latencies.append(time.perf_counter() - began)
                    results[name] = percentiles(latencies)
                return results
        finally:
            process.terminate()
            process.wait(timeout=60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs=2, type=Path, help="two checkouts: before, after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--posts", type=int, default=300, help="step POSTs measured per round")
    parser.add_argument("--plans", type=int, default=100, help="plans measured per round")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}", flush=True)
    seen: dict[str, list[dict]] = {str(t): [] for t in args.trees}
    for number in range(args.rounds):
        for tree in args.trees if number % 2 == 0 else reversed(args.trees):
            wall, cpu = record_rate(tree)
            result = {
                "record_steps_per_s": wall,
                "record_steps_per_cpu_s": cpu,
                **service(tree, args.posts, args.plans),
            }
            seen[str(tree)].append(result)
            print(json.dumps({"round": number, "tree": str(tree), **result}), flush=True)
    for tree, results in seen.items():
        print(
            json.dumps({
                "tree": tree,
                "record_steps_per_s": statistics.median(r["record_steps_per_s"] for r in results),
                "record_steps_per_cpu_s": statistics.median(r["record_steps_per_cpu_s"] for r in results),
                "steps_p50_ms": statistics.median(r["steps"]["p50_ms"] for r in results),
                "plan_p50_ms": statistics.median(r["plan"]["p50_ms"] for r in results),
            }),
            flush=True,
        )  # fmt: skip
    print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
