"""Fleet soak: several `portfolio serve` replicas on one trace store, a replica killed mid-load, no step lost.

N replicas (default 2) share one `--traces` target (a new SQLite file by default, or a PostgreSQL URL). Client
threads (default 16), each a runtime behind a load balancer, loop for `--seconds`: plan a four-step run
(`/v1/plan` with a run id), post its first two steps one request each (`/v1/steps` with an `Idempotency-Key`),
replan from the state they reached (`/v1/replan`: it must hand back the last two steps only,
checked by the validator) and post those. A request goes to the next replica in turn; on a connection error or a
503 it is sent again to another (a load balancer's retry), up to `RETRIES` times, the same idempotency key with
it. At `--kill-at` seconds one replica is killed with SIGKILL and started again `--restart-after` seconds later;
`--restart-store CMD` runs a shell command at `--restart-store-at` seconds (restarting PostgreSQL, say).

At the end every step a replica acknowledged (a 2xx answer) must be in the store exactly once, counted by
(run id, step) through the store's own API, and no (run id, step) twice. Reported: those counts, p50/p99
latency of step posts and of plans (plans and replans, each as its client saw it, retries included), requests
that failed after every retry, and wrong plans.

    PYTHONPATH=. python -m benchmarks.experiments.fleet_soak --seconds 60            # docs/benchmarks.md
    PYTHONPATH=. python -m benchmarks.experiments.fleet_soak --traces postgresql://... --restart-store "..."

`tests/test_fleet_soak.py` runs `soak` for a few seconds with two clients and one kill on every `make test`, on
SQLite and on a PostgreSQL cluster of its own that it restarts mid-load.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks.bench_service import launch
from portfolio.benchsuite.report import percentile as report_percentile

RETRIES = 20  # a request is sent this many times at most, to the replicas in turn
RETRY_PAUSE_S = 0.1  # between two tries: a replica that was just killed is not seen again at once

# Four steps in a row, none consuming what it needs: from the state after two, all four apply again, so only the
# recorded steps say what ran (the replan must not hand back `s1` and `s2`).
DOMAIN = """(define (domain relay) (:requirements :strips)
  (:predicates (done1) (done2) (done3) (done4))
  (:action s1 :parameters () :precondition (and) :effect (done1))
  (:action s2 :parameters () :precondition (done1) :effect (done2))
  (:action s3 :parameters () :precondition (done2) :effect (done3))
  (:action s4 :parameters () :precondition (done3) :effect (done4)))"""
PROBLEM = "(define (problem relay-1) (:domain relay) (:init) (:goal (done4)))"
PLAN = ["(s1)", "(s2)", "(s3)", "(s4)"]
AFTER_TWO = ["(done1)", "(done2)"]


@dataclass
class Replicas:
    """The replicas' processes and URLs; a killed one's slot holds None until it is started again."""

    args: list[str]
    log: Path
    slots: list[tuple[subprocess.Popen, str] | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    turn: itertools.count = field(default_factory=itertools.count)

    def start(self, index: int) -> None:
        with open(self.log, "a") as log:
            process, url = launch(self.args, stderr=log)
        with self.lock:
            while len(self.slots) <= index:
                self.slots.append(None)
            self.slots[index] = (process, url)

    def kill(self, index: int) -> None:
        with self.lock:
            slot, self.slots[index] = self.slots[index], None
        if slot is not None:
            _kill_family(slot[0], signal.SIGKILL)

    def next_url(self) -> str | None:
        """The next live replica's URL, in turn (a load balancer's round robin); None when none is up."""
        with self.lock:
            live = [slot[1] for slot in self.slots if slot is not None]
        return live[next(self.turn) % len(live)] if live else None

    def stop(self) -> None:
        for index in range(len(self.slots)):
            with self.lock:
                slot, self.slots[index] = self.slots[index], None
            if slot is not None:
                _kill_family(slot[0], signal.SIGTERM)


def _kill_family(process: subprocess.Popen, sig: int) -> None:
    """`sig` to the server; with SIGTERM it stops its workers itself, with SIGKILL its workers follow it (they
    die with their parent); either way whatever is left of its family after 15 s is killed."""
    try:
        family = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    process.send_signal(sig)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    _, alive = psutil.wait_procs(family, timeout=15)
    for child in alive:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


@dataclass
class Tally:
    """What the clients saw, shared by their threads under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: set[tuple[str, int]] = field(default_factory=set)
    step_latencies: list[float] = field(default_factory=list)
    plan_latencies: list[float] = field(default_factory=list)
    retries: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # requests that failed after every retry, by why
    wrong_plans: list[str] = field(default_factory=list)
    runs: int = 0

    def fail(self, why: str) -> None:
        with self.lock:
            self.failed[why] = self.failed.get(why, 0) + 1


def send(
    replicas: Replicas,
    tally: Tally,
    route: str,
    body: dict,
    headers: dict[str, str],
    connections: dict[str, httpx.Client],
) -> httpx.Response | None:
    """POST `body` to `route` of the replicas in turn until one answers other than 503 (or a connection error);
    the answer, or None when every try failed (counted in `tally.failed`). `connections`: the client's
    keep-alive connection to each replica, by URL (one that failed is closed and opened anew)."""
    why = "no replica up"
    for attempt in range(RETRIES):
        if attempt:
            with tally.lock:
                tally.retries += 1
            time.sleep(RETRY_PAUSE_S)  # a pause between a load balancer's tries is the point here
        url = replicas.next_url()
        if url is None:
            continue
        http = connections.get(url) or connections.setdefault(url, httpx.Client(base_url=url, timeout=60))
        try:
            answer = http.post(route, json=body, headers=headers)
        except httpx.TransportError as error:
            why = f"{route}: {type(error).__name__}"
            connections.pop(url).close()
            continue
        if answer.status_code == 503:
            why = f"{route}: 503 {answer.json().get('kind')}"
            continue
        return answer
    tally.fail(why)
    return None


def client(replicas: Replicas, tally: Tally, name: str, stop: threading.Event) -> None:
    """Runs of the relay task until `stop`: plan, two steps, replan (checked), two steps; one keep-alive
    connection to each replica, as a load balancer keeps them."""
    from domains.literals import parse_ground_atoms
    from domains.pddl import parse_task

    task = parse_task(DOMAIN, PROBLEM, "domain", "problem")
    after_two = parse_ground_atoms(task, AFTER_TWO)
    connections: dict[str, httpx.Client] = {}
    try:
        runs(replicas, tally, name, stop, task, after_two, connections)
    finally:
        for http in connections.values():
            http.close()


def runs(replicas: Replicas, tally: Tally, name: str, stop: threading.Event, task, after_two, connections) -> None:
    """`client`'s loop, on its `connections`."""
    from domains.ground_text import parse_ground_action
    from domains.validate import validate_plan

    for n in itertools.count():
        if stop.is_set():
            return
        run = f"{name}-{n}"

        def timed(route: str, body: dict, headers: dict[str, str], into: list[float]) -> dict | None:
            start = time.monotonic()
            answer = send(replicas, tally, route, body, headers, connections)
            if answer is None:
                return None
            if answer.status_code // 100 != 2:
                tally.fail(f"{route}: {answer.status_code} {answer.json().get('kind')}")
                return None
            with tally.lock:
                into.append(time.monotonic() - start)
            return answer.json()

        def post_step(step: int, action: str) -> bool:
            body = {"steps": [{"run_id": run, "step": step, "action": action.strip("()"), "outcome": "success"}]}
            answer = timed("/v1/steps", body, {"Idempotency-Key": f"{run}:{step}"}, tally.step_latencies)
            if answer is not None:
                with tally.lock:
                    tally.acknowledged.add((run, step))
            return answer is not None

        planned = timed("/v1/plan", {"domain": DOMAIN, "problem": PROBLEM, "run_id": run}, {}, tally.plan_latencies)
        if planned is None:
            continue
        if planned.get("plan") != PLAN:
            with tally.lock:
                tally.wrong_plans.append(f"{run}: plan {planned.get('plan')}")
            continue
        if not (post_step(0, PLAN[0]) and post_step(1, PLAN[1])):
            continue
        again = timed("/v1/replan", {"run_id": run, "state": AFTER_TWO}, {}, tally.plan_latencies)
        if again is None:
            continue
        rest = again.get("plan") or []
        valid = validate_plan(task, [parse_ground_action(s) for s in rest], init=after_two).ok
        if rest != PLAN[2:] or not valid:
            with tally.lock:
                tally.wrong_plans.append(f"{run}: replan {rest}")
            continue
        if post_step(2, PLAN[2]) and post_step(3, PLAN[3]):
            with tally.lock:
                tally.runs += 1


def stored_steps(target: str, prefix: str) -> dict[tuple[str, int], int]:
    """(run id, step) -> how many rows the store holds, for the runs whose id starts with `prefix`."""
    from traces.store import TraceStore

    counts: dict[tuple[str, int], int] = {}
    with TraceStore(target) as store:
        for record in store.iter_steps():
            if record.run_id.startswith(prefix):
                key = (record.run_id, record.step)
                counts[key] = counts.get(key, 0) + 1
    return counts


def percentile(values: list[float], q: float) -> float | None:
    """`portfolio.benchsuite.report.percentile` (q in 0..100); None when nothing was measured."""
    return report_percentile(values, q) if values else None


def soak(
    target: str,
    replicas: int = 2,
    clients: int = 16,
    seconds: float = 120.0,
    workers: int = 1,
    kill_at: float | None = None,
    restart_after: float = 10.0,
    restart_store: str | None = None,
    restart_store_at: float | None = None,
    log: Path | None = None,
) -> dict[str, Any]:
    """Run the soak (module docstring) and return its report. `kill_at`: seconds into the load when replica 0 is
    killed (None: at a third of `seconds`; a negative number: never)."""
    kill_at = seconds / 3 if kill_at is None else kill_at
    log = log or Path(tempfile.mkdtemp(prefix="fleet-soak-")) / "servers.log"
    args = ["--workers", str(workers), "--delegates", "fast-downward", "--traces", target, "--insecure"]
    args += ["--queue", "1000", "--rps", "100000", "--max-concurrent-plans", "1000"]
    fleet = Replicas(args, log)
    prefix = f"soak{os.getpid()}x{time.time_ns() % 10**9}-"
    tally, stop = Tally(), threading.Event()
    events: list[str] = []
    starters = [threading.Thread(target=fleet.start, args=(i,)) for i in range(replicas)]
    for thread in starters:
        thread.start()
    for thread in starters:
        thread.join()
    if sum(slot is not None for slot in fleet.slots) < replicas:
        fleet.stop()
        raise RuntimeError(f"not every replica started (log: {log})")
    threads = [threading.Thread(target=client, args=(fleet, tally, f"{prefix}c{i}", stop)) for i in range(clients)]
    began = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        plan = sorted(
            [(kill_at, "kill")] * (kill_at >= 0)
            + [(kill_at + restart_after, "restart")] * (kill_at >= 0)
            + [(restart_store_at if restart_store_at is not None else seconds / 2, "store")] * bool(restart_store)
        )
        for at, what in plan:
            if at >= seconds:
                break
            stop.wait(max(0.0, began + at - time.monotonic()))  # the schedule's moment: time passing is the point
            said = ""
            if what == "kill":
                fleet.kill(0)
            elif what == "restart":
                fleet.start(0)
            else:
                done = subprocess.run(restart_store or "", shell=True, capture_output=True, text=True)
                said = f" (--restart-store exited {done.returncode})"
            events.append(f"{what} done at {time.monotonic() - began:.1f} s{said}")
        stop.wait(max(0.0, began + seconds - time.monotonic()))
        stop.set()
        for thread in threads:
            thread.join(timeout=180)
    finally:
        stop.set()
        fleet.stop()
    stored = stored_steps(target, prefix)
    lost = sorted(tally.acknowledged - set(stored))
    twice = sorted(key for key, count in stored.items() if count > 1)
    ms = 1000.0
    return {
        "replicas": replicas,
        "clients": clients,
        "seconds": seconds,
        "events": events,
        "runs_completed": tally.runs,
        "steps_acknowledged": len(tally.acknowledged),
        "steps_stored": len(stored),
        "acknowledged_missing": len(lost),
        "stored_twice": len(twice),
        "step_p50_ms": _scaled(percentile(tally.step_latencies, 50), ms),
        "step_p99_ms": _scaled(percentile(tally.step_latencies, 99), ms),
        "plan_p50_ms": _scaled(percentile(tally.plan_latencies, 50), ms),
        "plan_p99_ms": _scaled(percentile(tally.plan_latencies, 99), ms),
        "plans": len(tally.plan_latencies),
        "step_posts": len(tally.step_latencies),
        "retries": tally.retries,
        "failed": dict(tally.failed),
        "wrong_plans": tally.wrong_plans[:10],
        "examples_missing": [list(key) for key in lost[:10]],
        "log": str(log),
    }


def _scaled(value: float | None, by: float) -> float | None:
    return None if value is None else round(value * by, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", help="the store every replica shares (default: a new SQLite file)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--workers", type=int, default=1, help="planner workers per replica (default 1)")
    parser.add_argument("--kill-at", type=float, help="seconds in (default a third of --seconds; -1: no kill)")
    parser.add_argument("--restart-after", type=float, default=10.0, help="seconds from the kill to the restart")
    parser.add_argument("--restart-store", metavar="CMD", help="a shell command run mid-load (restart the database)")
    parser.add_argument("--restart-store-at", type=float, help="seconds in (default half of --seconds)")
    args = parser.parse_args(argv)
    target = args.traces or str(Path(tempfile.mkdtemp(prefix="fleet-soak-")) / "traces.db")
    report = soak(
        target, args.replicas, args.clients, args.seconds, args.workers, args.kill_at, args.restart_after,
        args.restart_store, args.restart_store_at,
    )  # fmt: skip
    print(json.dumps(report, indent=2))
    return 0 if not (report["acknowledged_missing"] or report["stored_twice"] or report["wrong_plans"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
