"""Many agents, two tenants: `portfolio serve` with an API key per agent against one shared --token, on loopback,
and the steps acknowledged under load against a kill -9 of the server (never part of `make test`).

    python -m benchmarks.bench_tenants                              # 4 rounds of 30 s per arm, then the kill -9 run
    python -m benchmarks.bench_tenants --rounds 2 --seconds 10 --kill-seconds 0   # shorter, no kill
    pytest benchmarks/bench_tenants.py --benchmark-only             # one short round of each arm

1. Throughput, two arms of `--clients` (default 16) client threads with keep-alive connections, against the same
   server (`--workers`, a trace store in a scratch folder, the same options; a fresh store each run):
   `token`: every client sends the server's --token (one admin principal of the default tenant);
   `keys`: each client its own key (`add_key`, as `portfolio keys add NAME --tenant T --scopes plan,steps:write
   --rps 1000 --max-concurrent-plans 16`), half in tenant `acme`, half in `globex`, so every request looks a key
   up (1 s cache) and counts against that key's own quotas, and every step is namespaced and gets a provenance row.
   Each client loops over runs: plan blocks-4-0 with a run id of its own, record the plan's first step as
   failed (a one-step /v1/steps), replan from the observed state (the initial one), record the new plan's steps
   (one batch). The arms alternate (token then keys, keys then token, ...) for `--rounds` rounds of `--seconds`
   each, a new server per run, warmed by a few runs per client first, so that a noisy shared machine hits both
   alike.
   Per run: requests/s (answered 200), p50/p95/p99 per route, errors by route and status; per round the ratio
   keys/token, and its median over rounds (target >= 0.9).
2. Durability: the keys arm for `--kill-seconds`, the server and its workers killed with SIGKILL half-way,
   started again on the same store; every step whose batch was answered 200 must be in the store under
   `@tenant/run-id`, per tenant (target: 0 lost). The restarted server's /v1/actions (one key per tenant) must
   count at least as many steps as were acknowledged in that tenant.

The clients share the machine's cores with the server and its workers (see `benchmarks.bench_service`): report
the load average, printed before and after.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from benchmarks.bench_service import SMALL, start_server, stop_server

pytestmark = pytest.mark.slow

TENANTS = ("acme", "globex")
ROUTES = ("plan", "steps", "replan")
# probBLOCKS-4-0's initial state: the state observed after its first step failed without changing anything
INIT = ["(clear c)", "(clear a)", "(clear b)", "(clear d)", "(ontable c)", "(ontable a)", "(ontable b)"]
INIT += ["(ontable d)", "(handempty)"]
KEY_RPS = 1000.0  # each key's own quotas, raised for the load test (the defaults are 100 req/s, 8 plans)
KEY_PLANS = 16


@dataclass
class Agent:
    name: str  # also the prefix of its run ids
    tenant: str  # where its runs are stored ("default" for the token)
    secret: str


@dataclass
class Tally:
    """What the clients of one run saw: latencies per route (answered 200), errors by route and status, and the
    (tenant, run_id, step) of every step whose batch was answered 200."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter = field(default_factory=Counter)
    acknowledged: set[tuple[str, str, int]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, route: str, began: float, answer: httpx.Response | None, error: str = "") -> bool:
        took = time.perf_counter() - began
        ok = answer is not None and answer.status_code == 200
        with self.lock:
            if ok:
                self.latencies[route].append(took)
            else:
                self.errors[f"{route} {answer.status_code if answer is not None else error}"] += 1
        return ok


def make_agents(store_path: Path, arm: str, clients: int, token: str) -> list[Agent]:
    """The arm's clients: each its own key in `store_path` (keys), or all the server's token (token)."""
    if arm == "token":
        return [Agent(f"c{i}", "default", token) for i in range(clients)]
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    agents = []
    with TraceStore(store_path) as store:
        for i in range(clients):
            tenant = TENANTS[i % len(TENANTS)]
            secret = add_key(
                store, f"agent-{i}", tenant, "plan,steps:write,read", rps=KEY_RPS, max_concurrent_plans=KEY_PLANS
            )
            agents.append(Agent(f"c{i}", tenant, secret))
    return agents


def one_run(http: httpx.Client, agent: Agent, number: int, tally: Tally) -> None:
    """Plan, record a failed first step, replan from the observed state, record the new plan's steps."""
    run_id = f"{agent.name}-{number}"

    def post(route: str, body: dict) -> dict | None:
        began = time.perf_counter()
        try:
            answer = http.post(f"/v1/{route}", json=body)
        except httpx.HTTPError as error:
            tally.note(route, began, None, type(error).__name__)
            return None
        return answer.json() if tally.note(route, began, answer) else None

    def record(steps: list[dict]) -> bool:
        answer = post("steps", {"steps": steps})
        if answer is None or answer["conflicts"]:
            return False
        with tally.lock:
            tally.acknowledged.update((agent.tenant, s["run_id"], s["step"]) for s in steps)
        return True

    planned = post("plan", {**SMALL, "run_id": run_id})
    if planned is None or not planned.get("plan"):
        return
    if not record([{"run_id": run_id, "step": 0, "action": planned["plan"][0], "outcome": "failure"}]):
        return
    replanned = post("replan", {"run_id": run_id, "state": INIT})
    if replanned is None or not replanned.get("plan"):
        return
    record(
        [
            {"run_id": run_id, "step": 1 + i, "action": action, "outcome": "success"}
            for i, action in enumerate(replanned["plan"])
        ]
    )


def drive(url: str, agents: list[Agent], stop: threading.Event, tally: Tally, warm_runs: int = 0) -> float:
    """Every agent on its own thread and keep-alive connection, runs until `stop` (or `warm_runs` each when
    given); the wall seconds."""

    def client(agent: Agent) -> None:
        headers = {"Authorization": f"Bearer {agent.secret}"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            number = 0
            while not stop.is_set() and (not warm_runs or number < warm_runs):
                one_run(http, agent, number if not warm_runs else -1 - number, tally)
                number += 1

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(agents)) as pool:
        for future in [pool.submit(client, a) for a in agents]:
            future.result()
    return time.perf_counter() - started


def report(tally: Tally, wall: float) -> dict:
    def pct(ordered: list[float], q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

    routes = {}
    for route in ROUTES:
        ordered = sorted(tally.latencies[route])
        if ordered:
            routes[route] = {"n": len(ordered), **{f"p{q}_ms": pct(ordered, q / 100) for q in (50, 95, 99)}}
    answered = sum(len(v) for v in tally.latencies.values())
    return {
        "rps": round(answered / wall, 1),
        "runs_per_s": round(len(tally.latencies["replan"]) / wall, 1),
        "routes": routes,
        "errors": dict(tally.errors),
        "wall_s": round(wall, 1),
    }


def serve(store_path: Path, workers: int, token: str) -> tuple[subprocess.Popen, str]:
    """The server both arms run, with the same options: `--traces store_path`, the token from the environment
    (as `ps` should not show it), and whatever keys the store holds."""
    return start_server(workers, "--traces", str(store_path), auth=(), env={"PORTFOLIO_TOKEN": token})


def measure_arm(arm: str, seconds: float, clients: int, workers: int) -> dict:
    """One run of one arm on a fresh store and server: warm-up, then `seconds` of load."""
    token = "bench-" + os.urandom(16).hex()
    with tempfile.TemporaryDirectory(prefix=f"bench-tenants-{arm}-") as scratch:
        store_path = Path(scratch) / "traces.db"
        agents = make_agents(store_path, arm, clients, token)
        process, url = serve(store_path, workers, token)
        try:
            drive(url, agents, threading.Event(), Tally(), warm_runs=2)
            stop, tally = threading.Event(), Tally()
            threading.Timer(seconds, stop.set).start()
            return report(tally, drive(url, agents, stop, tally))
        finally:
            stop_server(process)


def interleaved(rounds: int, seconds: float, clients: int, workers: int) -> dict:
    per_round = []
    for number in range(rounds):
        order = ("token", "keys") if number % 2 == 0 else ("keys", "token")  # neither always first
        results = {arm: measure_arm(arm, seconds, clients, workers) for arm in order}
        ratio = round(results["keys"]["rps"] / results["token"]["rps"], 3)
        per_round.append({"round": number + 1, **results, "ratio": ratio, "load": os.getloadavg()})
        print(json.dumps(per_round[-1]), flush=True)
    ratios = [r["ratio"] for r in per_round]
    return {"ratios": ratios, "median_ratio": round(statistics.median(ratios), 3)}


def stored_steps(store_path: Path) -> set[tuple[str, int]]:
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as db:
        return {(run_id, step) for run_id, step in db.execute("SELECT run_id, step FROM steps")}


def kill_nine(seconds: float, clients: int, workers: int) -> dict:
    """The keys arm for `seconds`, SIGKILL to the server and its workers half-way, restart on the same store;
    acknowledged steps against stored ones, per tenant."""
    token = "bench-" + os.urandom(16).hex()
    with tempfile.TemporaryDirectory(prefix="bench-tenants-kill-") as scratch:
        store_path = Path(scratch) / "traces.db"
        agents = make_agents(store_path, "keys", clients, token)
        process, url = serve(store_path, workers, token)
        family = [process, *psutil.Process(process.pid).children(recursive=True)]
        stop, tally = threading.Event(), Tally()
        threading.Timer(seconds, stop.set).start()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            load = pool.submit(drive, url, agents, stop, tally)
            time.sleep(seconds / 2)
            acknowledged_before_kill = len(tally.acknowledged)
            os.kill(process.pid, signal.SIGKILL)
            for child in family[1:]:
                try:
                    child.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass
            process.wait()
            stop.set()  # the clients' requests after the kill fail: stop them
            load.result()
        restarted, url = serve(store_path, workers, token)
        try:
            stored = stored_steps(store_path)
            per_tenant = {}
            for tenant in TENANTS:
                acked = {(f"@{tenant}/{run_id}", step) for t, run_id, step in tally.acknowledged if t == tenant}
                reader = next(a for a in agents if a.tenant == tenant)
                counted = httpx.get(
                    url + "/v1/actions", headers={"Authorization": f"Bearer {reader.secret}"}, timeout=60
                ).json()
                per_tenant[tenant] = {
                    "acknowledged": len(acked),
                    "lost": len(acked - stored),
                    "steps_the_restarted_server_counts": sum(a["steps"] for a in counted["actions"]),
                }
        finally:
            stop_server(restarted)
    return {
        "acknowledged_when_killed": acknowledged_before_kill,
        "acknowledged": len(tally.acknowledged),
        "errors": dict(tally.errors),
        "per_tenant": per_tenant,
        "lost": sum(t["lost"] for t in per_tenant.values()),
    }


def main(argv: list[str] | None = None) -> int:
    from portfolio.serve.pool import default_workers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--clients", type=int, default=16, help="client threads, split between two tenants")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of both arms, each round's first arm alternating")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of load per arm and round")
    parser.add_argument("--kill-seconds", type=float, default=60.0, help="the kill -9 run's length (0: skip it)")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}", flush=True)
    lost = 0
    if args.rounds:
        print(f"throughput: {json.dumps(interleaved(args.rounds, args.seconds, args.clients, args.workers))}")
    if args.kill_seconds:
        result = kill_nine(args.kill_seconds, args.clients, args.workers)
        lost = result["lost"]
        print(f"kill -9: {json.dumps(result)}", flush=True)
    print(f"load average after: {os.getloadavg()}", flush=True)
    return 1 if lost else 0


def test_tenants_short_rounds(benchmark):
    """One 10 s run of each arm for `make bench`: no errors in either."""
    result = benchmark.pedantic(lambda: [measure_arm(a, 10, 16, 2) for a in ("token", "keys")], rounds=1)
    benchmark.extra_info.update({"token": result[0], "keys": result[1]})
    assert not result[0]["errors"] and not result[1]["errors"], result


if __name__ == "__main__":
    raise SystemExit(main())
