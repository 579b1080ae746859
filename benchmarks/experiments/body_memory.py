"""What a large request body costs the server's own process (its resident memory; the workers are separate),
against `portfolio serve --workers 2 --token T --memory-limit MB --traces DB` on loopback, read with psutil.

`--per-route`: for each of /v1/steps (a batch of step records), /v1/validate and /v1/plan (a blocks problem with
that many objects), a fresh server is sent one body of `--mb` MB and its peak resident memory sampled every 10 ms:
(peak - resident before) / body bytes is the figure the Guard's admission budgets with
(`portfolio.serve.guard.MEMORY_PER_BODY_BYTE`). Then `--batches` step batches of `--mb` MB are sent at once to
one server, and its peak and the answers are printed: the server must stay under its --memory-limit.

    PYTHONPATH=. python -m benchmarks.experiments.body_memory --mb 23 --batches 4 --memory-limit 1024 --per-route

Bounded: every request has a client timeout, each server is stopped (SIGKILL after 15 s) whatever happens.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil

from benchmarks.bench_service import launch, peak_rss, terminate

REPO = Path(__file__).resolve().parents[2]
BLOCKS = REPO / "tests" / "data" / "ipc" / "blocks"
HEADERS = {"Authorization": "Bearer T", "content-type": "application/json"}


def step_batch(megabytes: float, first: int = 0) -> bytes:
    """A /v1/steps body of about `megabytes` MB: steps of 100 runs each, as an agent reports them."""
    step = {"run_id": "r", "step": 0, "action": "pick-up", "args": ["b", "c"], "outcome": "success"}
    step |= {"duration_ms": 12.5, "features": {"hour": "peak"}}
    count = int(megabytes * 1024 * 1024) // (len(json.dumps(step)) + 8)
    steps = [{**step, "run_id": f"run-{first}-{i // 100}", "step": i % 100} for i in range(count)]
    return json.dumps({"steps": steps}).encode()


def blocks_body(megabytes: float, plan: bool) -> bytes:
    """A /v1/plan or /v1/validate body of about `megabytes` MB: a blocks problem with that many objects."""
    count = int(megabytes * 1024 * 1024) // 40
    objects = " ".join(f"b{i}" for i in range(count))
    init = " ".join(f"(clear b{i}) (ontable b{i})" for i in range(count))
    problem = (
        f"(define (problem big) (:domain blocks) (:objects {objects}) (:init (handempty) {init}) (:goal (on b0 b1)))"
    )
    body = {"domain": (BLOCKS / "domain.pddl").read_text(), "problem": problem}
    return json.dumps(body if plan else {**body, "plan": ["(pick-up b0)"]}).encode()


@contextmanager
def server(memory_limit: int) -> Iterator[tuple[str, psutil.Process]]:
    folder = tempfile.mkdtemp(prefix="body-memory-")
    args = ["--workers", "2", "--token", "T", "--traces", os.path.join(folder, "t.db")]
    args += ["--memory-limit", str(memory_limit)]
    args += ["--delegates", "fast-downward", "--body-mb-per-s", "100000", "--rps", "100000"]
    process, url = launch(args)
    try:
        time.sleep(1.0)
        yield url, psutil.Process(process.pid)
    finally:
        terminate(process)


def post(url: str, path: str, body: bytes) -> str:
    try:
        answer = httpx.post(url + path, content=body, headers=HEADERS, timeout=300)
        return f"{answer.status_code} {answer.json().get('kind', '')}".strip()
    except httpx.HTTPError as error:
        return type(error).__name__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=23.0, help="body size (MB)")
    parser.add_argument("--batches", type=int, default=4, help="step batches sent at once")
    parser.add_argument("--memory-limit", type=int, default=1024, help="the server's --memory-limit (MB)")
    parser.add_argument("--per-route", action="store_true", help="measure each route's cost per body byte first")
    args = parser.parse_args()
    result: dict = {"mb": args.mb, "memory_limit_mb": args.memory_limit}
    if args.per_route:
        per_route = {}
        for path, body in [
            ("/v1/steps", step_batch(args.mb)),
            ("/v1/validate", blocks_body(args.mb, plan=False)),
            ("/v1/plan", blocks_body(args.mb, plan=True)),
        ]:
            with server(args.memory_limit) as (url, process), peak_rss(process) as seen:
                answer = post(url, path, body)
            grown = (seen["peak"] - seen["before"]) * 2**20
            per_route[path] = {
                "answer": answer,
                "resident_before_mb": round(seen["before"]),
                "peak_mb": round(seen["peak"]),
                "per_body_byte": round(grown / len(body), 1),
            }
        result["per_route"] = per_route
    bodies = [step_batch(args.mb, first=i) for i in range(args.batches)]
    with server(args.memory_limit) as (url, process), peak_rss(process) as seen:
        with concurrent.futures.ThreadPoolExecutor(args.batches) as pool:
            answers = list(pool.map(lambda body: post(url, "/v1/steps", body), bodies))
    result["batches_at_once"] = {
        "batches": args.batches,
        "answers": answers,
        "resident_before_mb": round(seen["before"]),
        "peak_mb": round(seen["peak"]),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
