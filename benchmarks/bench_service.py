"""A bounded load benchmark of `portfolio serve` on loopback (never part of `make test`).

    python -m benchmarks.bench_service                       # the three targets, numbers printed
    python -m benchmarks.bench_service --requests 400        # shorter
    python -m benchmarks.bench_service --keep-alive-only     # target 4 alone (~30 s)
    pytest benchmarks/bench_service.py --benchmark-only      # one short round under pytest-benchmark

1. Throughput: 16 concurrent clients (threads with keep-alive httpx clients) send `--requests` small plan
   requests (blocks, 4 blocks, PDDL texts) to a server with 1 worker, then to one with `--workers` (default:
   the cores available). Reported: errors, p50/p99 latency, requests/s, and the scaling ratio
   throughput(N) / (N x throughput(1)); target >= 0.8.
2. Isolation: with N workers, small requests from `--probe-clients` clients, first alone, then while one
   request that takes `--long-seconds` (the largest parking problem with that budget) is in flight. Target:
   p99 with it <= 2 x p99 without it.
3. Shutdown: SIGTERM with a request in flight; seconds to exit, exit code, processes left. Target <= 5 s.
4. Keep-alive round trip: one client sends `--round-trips` requests one after another on one keep-alive
   connection, a one-step POST /v1/steps and a GET /v1/health each (a 1-worker server with a trace store in a
   scratch folder); p50/p99 of each. Measures what the server adds to a small answer: with Nagle's algorithm on
   the accepted socket (no TCP_NODELAY) a response written in two pieces waited for the client's delayed ACK,
   ~40 ms each.

The clients run on the same machine as the server and its workers: on a 2-core machine they compete for the
same cores, so the numbers are a floor for what a separate client machine would see. Report the load average.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import psutil
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
IPC = REPO / "tests" / "data" / "ipc"  # in the repository: the benchmark needs nothing beside the clone
SMALL = {
    "domain": (IPC / "blocks" / "domain.pddl").read_text(),
    "problem": (IPC / "blocks" / "probBLOCKS-4-0.pddl").read_text(),
}
PARKING = IPC / "parking-sat11-strips"


def long_request(seconds: float) -> dict:
    problem = max(PARKING.glob("pfile*.pddl"), key=lambda p: p.stat().st_size)
    return {"domain": (PARKING / "domain.pddl").read_text(), "problem": problem.read_text(), "budget": seconds}


def ready(url: str) -> bool:
    """Whether the server at `url` answers its health check with every planner worker started."""
    try:
        health = httpx.get(url + "/v1/health", timeout=5)
    except httpx.TransportError:  # not listening yet
        return False
    return health.status_code == 200 and health.json()["ready"] == health.json()["workers"]


def launch(
    args: Sequence[str],
    env: dict[str, str] | None = None,
    stderr: int | IO[Any] = subprocess.DEVNULL,
    preexec_fn: Callable[[], None] | None = None,
) -> tuple[subprocess.Popen, str]:
    """`portfolio serve --port 0 ARGS` on loopback, once every worker is ready; (process, base URL). `env`: more
    environment; `stderr`: where the server's log goes (when piped, a server that exits before it serves raises
    with its log); `preexec_fn`: run in the server's process before it starts (a resource limit). Killed, and
    RuntimeError, when it is not ready within 120 s. The start-up every benchmark and experiment that runs a
    server shares (`start_server`, `benchmarks.experiments.*`), and the tests' `start_cli_server`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "portfolio.cli", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        preexec_fn=preexec_fn,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("serving on "):
        exited = process.poll() is not None  # then its stderr, when piped, has ended: read without waiting
        process.kill()
        process.wait()
        said = process.stderr.read() if exited and process.stderr is not None else ""
        raise RuntimeError(f"server did not start: {line!r}{said}")
    url = line.split()[2].removesuffix("/v1/")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ready(url):
            return process, url
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise RuntimeError("server did not become ready")


def terminate(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `grace_s` seconds; returns once it has exited. What an
    experiment's `finally` does with its server, so that a failed run leaves none behind."""
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def peak_rss(process: psutil.Process, every_s: float = 0.01) -> Iterator[dict[str, float]]:
    """{"before", "peak"} resident MB of `process`, sampled every `every_s` seconds while the block
    runs (`benchmarks.experiments.body_memory`, `hostile_service`)."""
    seen = {"before": process.memory_info().rss / 2**20}
    seen["peak"] = seen["before"]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                seen["peak"] = max(seen["peak"], process.memory_info().rss / 2**20)
            except psutil.Error:
                return
            time.sleep(every_s)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


def start_server(
    workers: int, *extra: str, auth: tuple[str, ...] = ("--insecure",), env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """A server on a free loopback port, once every worker is ready; (process, base URL). `auth`: how it lets
    callers in (the default: everyone, as one identity); `env`: more environment (e.g. PORTFOLIO_TOKEN)."""
    return launch(
        [
            "--workers",
            str(workers),
            "--delegates",
            "fast-downward,pyperplan",
            "--queue",
            "1000",
            *auth,
            # server-wide quotas out of the way: what is measured is the server, not the 429s
            "--rps",
            "100000",
            "--max-concurrent-plans",
            "1000",
            *extra,
        ],
        env,
    )


def stop_server(process: subprocess.Popen) -> tuple[float, int, int]:
    """SIGTERM; (seconds to exit, exit code, processes of its family still running a second after exit).
    Zombies are not counted: they have ended, and wait for PID 1 to reap them (slow on this machine)."""
    family = psutil.Process(process.pid).children(recursive=True)
    start = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    took = time.monotonic() - start
    _, alive = psutil.wait_procs(family, timeout=1)
    running = 0
    for child in alive:
        try:
            running += child.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            pass
    return took, code, running


def load(url: str, requests: int, clients: int, stop: threading.Event | None = None) -> dict:
    """`requests` small plans from `clients` threads (or until `stop` is set); latencies and errors."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    remaining = [requests]

    def client() -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            while True:
                with lock:
                    if remaining[0] <= 0 or (stop is not None and stop.is_set()):
                        return
                    remaining[0] -= 1
                start = time.perf_counter()
                try:
                    answer = http.post("/v1/plan", json=SMALL)
                    ok = answer.status_code == 200 and answer.json()["status"] == "solved"
                    problem = "" if ok else f"{answer.status_code} {answer.text[:120]}"
                except httpx.HTTPError as error:
                    problem = f"{type(error).__name__}: {error}"
                took = time.perf_counter() - start
                with lock:
                    (errors.append(problem) if problem else latencies.append(took))

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    wall = time.perf_counter() - start
    return summary(latencies, errors, wall)


def summary(latencies: list[float], errors: list[str], wall: float) -> dict:
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    return {
        "ok": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "p50_ms": round(pct(0.50), 1),
        "p99_ms": round(pct(0.99), 1),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 1) if ordered else float("nan"),
        "throughput_rps": round(len(latencies) / wall, 1),
        "wall_s": round(wall, 1),
    }


def throughput(workers: int, requests: int, clients: int) -> dict:
    process, url = start_server(workers)
    try:
        load(url, 2 * clients, clients)  # warm the translation caches of every worker
        return load(url, requests, clients)
    finally:
        stop_server(process)


def isolation(workers: int, probes: int, clients: int, long_s: float) -> dict:
    process, url = start_server(workers, "--max-budget", str(long_s + 5))
    try:
        load(url, 2 * clients, clients)
        alone = load(url, probes, clients)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            big = pool.submit(httpx.post, url + "/v1/plan", json=long_request(long_s), timeout=long_s + 120)
            while httpx.get(url + "/v1/health").json()["busy"] < 1:
                time.sleep(0.01)
            started = time.monotonic()
            beside = load(url, probes, clients)
            in_flight = not big.done()
            big_status = big.result().json().get("status")
            big_seconds = time.monotonic() - started
        return {
            "alone": alone,
            "beside_long": beside,
            "long_still_running_when_probes_ended": in_flight,
            "long_status": big_status,
            "long_s_after_probes_started": round(big_seconds, 1),
            "p99_ratio": round(beside["p99_ms"] / alone["p99_ms"], 2),
        }
    finally:
        stop_server(process)


def shutdown(workers: int) -> dict:
    process, url = start_server(workers)  # the default --drain
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(httpx.post, url + "/v1/plan", json=long_request(20.0), timeout=60)
        while httpx.get(url + "/v1/health").json()["busy"] < 1:
            time.sleep(0.01)
        took, code, left = stop_server(process)
    return {"sigterm_to_exit_s": round(took, 2), "exit_code": code, "processes_left_running": left}


def keep_alive(round_trips: int) -> dict:
    """p50/p99 of `round_trips` sequential requests of each kind on one keep-alive connection (see target 4)."""
    with tempfile.TemporaryDirectory(prefix="bench-keepalive-") as scratch:
        process, url = start_server(1, "--traces", str(Path(scratch) / "traces.db"))
        try:
            with httpx.Client(base_url=url, timeout=60) as http:
                results = {}
                for name, send in (
                    ("steps", lambda i: http.post("/v1/steps", json={"steps": [keep_alive_step(i)]})),
                    ("health", lambda i: http.get("/v1/health")),
                ):
                    for i in range(20):  # warm: the connection, the store's first writes
                        send(-1 - i)
                    latencies, errors = [], []
                    start = time.perf_counter()
                    for i in range(round_trips):
                        began = time.perf_counter()
                        answer = send(i)
                        took = time.perf_counter() - began
                        (latencies if answer.status_code == 200 else errors).append(
                            took if answer.status_code == 200 else f"{answer.status_code} {answer.text[:120]}"
                        )
                    results[name] = summary(latencies, errors, time.perf_counter() - start)
                return results
        finally:
            stop_server(process)


def keep_alive_step(number: int) -> dict:
    """A one-step record, a new (run_id, step) for each `number` (negative: the warm-up's run)."""
    run, step = ("warm", -number) if number < 0 else ("keep-alive", number)
    return {"run_id": run, "step": step, "action": "(pick-up b)", "outcome": "success"}


def main(argv: list[str] | None = None) -> None:
    from portfolio.serve.pool import default_workers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--probes", type=int, default=300, help="small requests per isolation phase")
    parser.add_argument("--probe-clients", type=int, default=4)
    parser.add_argument("--long-seconds", type=float, default=30.0)
    parser.add_argument("--round-trips", type=int, default=500, help="sequential requests of each kind (target 4)")
    parser.add_argument("--keep-alive-only", action="store_true", help="measure target 4 alone")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}", flush=True)
    if args.keep_alive_only:
        print(f"keep-alive: {keep_alive(args.round_trips)}", flush=True)
        print(f"load average after: {os.getloadavg()}", flush=True)
        return
    one = throughput(1, args.requests, args.clients)
    print(f"1 worker : {one}", flush=True)
    many = throughput(args.workers, args.requests, args.clients)
    print(f"{args.workers} workers: {many}", flush=True)
    ratio = many["throughput_rps"] / (args.workers * one["throughput_rps"])
    print(
        f"scaling: {many['throughput_rps']} / ({args.workers} x {one['throughput_rps']}) = {ratio:.2f} (target >= 0.8)",
        flush=True,
    )
    print(
        f"isolation: {isolation(args.workers, args.probes, args.probe_clients, args.long_seconds)} "
        "(target p99_ratio <= 2)",
        flush=True,
    )
    print(f"shutdown: {shutdown(args.workers)} (target <= 5 s, 0 left)", flush=True)
    print(f"keep-alive: {keep_alive(args.round_trips)}", flush=True)
    print(f"load average after: {os.getloadavg()}", flush=True)


def test_service_throughput_short(benchmark):
    """One short round (200 requests, 2 workers) for `make bench`."""
    process, url = start_server(2)
    try:
        load(url, 16, 16)
        result = benchmark.pedantic(lambda: load(url, 200, 16), rounds=1, iterations=1)
        assert result["errors"] == 0, result["first_error"]
    finally:
        stop_server(process)


def test_service_keep_alive_round_trip(benchmark):
    """200 sequential round trips of each kind on one keep-alive connection, for `make bench`."""
    result = benchmark.pedantic(lambda: keep_alive(200), rounds=1, iterations=1)
    assert all(kind["errors"] == 0 for kind in result.values()), result


if __name__ == "__main__":
    main()
