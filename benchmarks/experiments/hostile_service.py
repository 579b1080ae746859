"""Hostile validation against `portfolio serve --workers 2 --token` on loopback (the hardening targets).

Sends `--hostile` validate requests at once, half a quantifier blow-up (a 7-variable forall over 50 objects),
half a ~30 MB body (a blocks problem with that many objects), then measures: how long `/v1/steps` and a
trivial validate take once they have all been answered, the server process's peak resident memory (it must
stay under its cap: nothing is parsed in it any more), and how long SIGTERM takes to exit.

    PYTHONPATH=. python -m benchmarks.experiments.hostile_service --hostile 20      # the issue's target

Bounded: every request has a client timeout, the server is stopped (SIGKILL after 15 s) whatever happens.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from benchmarks.bench_service import launch, peak_rss
from benchmarks.experiments.validation_flood import trivial, wedge

REPO = Path(__file__).resolve().parents[2]
IPC = REPO.parent / "shared" / "ipc"


def big_body(megabytes: int = 30) -> dict:
    count = megabytes * 1024 * 1024 // 40
    objects = " ".join(f"b{i}" for i in range(count))
    init = " ".join(f"(clear b{i}) (ontable b{i})" for i in range(count))
    problem = (
        f"(define (problem big) (:domain blocks) (:objects {objects}) (:init (handempty) {init}) (:goal (on b0 b1)))"
    )
    return {"domain": (IPC / "blocks" / "domain.pddl").read_text(), "problem": problem, "plan": ["(pick-up b0)"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", type=int, default=20)
    parser.add_argument("--memory-limit", type=int, default=1024, help="the server's --memory-limit (MB)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="hostile-")
    process, url = launch(
        ["--workers", "2", "--token", "t", "--traces", os.path.join(folder, "t.db")]
        + ["--memory-limit", str(args.memory_limit), "--delegates", "fast-downward,pyperplan"]
        # one token for every hostile client: its per-key quotas would refuse them (429) before the bounds
        # measured here are reached
        + ["--rps", "100000", "--body-mb-per-s", "100000", "--max-concurrent-plans", "1000"]
    )
    headers = {"Authorization": "Bearer t"}
    try:
        with peak_rss(psutil.Process(process.pid), every_s=0.05) as memory:
            bodies = [json.dumps(wedge(7, 50) if i % 2 == 0 else big_body()) for i in range(args.hostile)]
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(args.hostile) as pool:
                answers = list(
                    pool.map(
                        lambda body: (
                            httpx.post(
                                url + "/v1/validate",
                                content=body,
                                headers={**headers, "content-type": "application/json"},
                                timeout=300,
                            ).status_code
                        ),
                        bodies,
                    )
                )
            hostile_s = time.monotonic() - started
            step = {"run_id": "r", "step": 0, "action": "pick-up", "args": ["b"], "outcome": "success"}
            timed = {}
            for name, path, body in [
                ("steps", "/v1/steps", {"steps": [step]}),
                ("trivial_validate", "/v1/validate", trivial()),
            ]:
                began = time.monotonic()
                status = httpx.post(url + path, json=body, headers=headers, timeout=30).status_code
                timed[name] = {"status": status, "seconds": round(time.monotonic() - began, 3)}
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=15)
        result = {
            "hostile": args.hostile,
            "hostile_statuses": {str(s): answers.count(s) for s in set(answers)},
            "hostile_seconds": round(hostile_s, 1),
            **timed,
            "server_peak_rss_mb": round(memory["peak"]),
            "memory_limit_mb": args.memory_limit,
            "sigterm_exit_seconds": round(time.monotonic() - began, 2),
            "exit_code": code,
        }
        print(json.dumps(result, indent=1))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
