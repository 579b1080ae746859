"""Idle sockets against `portfolio serve --workers 2 --token T` under a descriptor limit, on loopback.

The server runs in its own process with RLIMIT_NOFILE set to `--nofile` (soft and hard, as `ulimit -n` does);
`--sockets` connections are opened and left idle, then another client sends `--requests` requests, each on a
connection of its own, and each is timed (an error counts as the time it took to fail). Printed: those times,
how many failed, how many of the idle sockets the server closed, and how much its log (stderr) grew, with the
number of tracebacks in it.

    PYTHONPATH=. python -m benchmarks.experiments.connection_flood --nofile 256 --sockets 400

Bounded: every request has a client timeout, the server is stopped (SIGKILL after 15 s) whatever happens.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench_service import launch, terminate

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nofile", type=int, default=256, help="the server's descriptor limit")
    parser.add_argument("--sockets", type=int, default=400, help="idle connections held open")
    parser.add_argument("--requests", type=int, default=20, help="another client's requests, timed")
    args = parser.parse_args()

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    log_path = Path(tempfile.mkdtemp(prefix="connection-flood-")) / "serve.log"
    with open(log_path, "wb") as log_file:
        process, url = launch(["--workers", "2", "--token", "T"], stderr=log_file, preexec_fn=limit)
    socks: list[socket.socket] = []
    try:
        host, port = url.removeprefix("http://").split(":")
        before = log_path.stat().st_size
        began = time.monotonic()
        for _ in range(args.sockets):
            socks.append(socket.create_connection((host, int(port)), timeout=10))
        opened_s = time.monotonic() - began
        times, failures = [], []
        for _ in range(args.requests):
            began = time.monotonic()
            try:
                answer = httpx.get(url + "/v1/actions", headers={"Authorization": "Bearer T"}, timeout=30)
                if answer.status_code != 400:  # past the key: this server has no trace store
                    failures.append(str(answer.status_code))
            except httpx.HTTPError as error:
                failures.append(type(error).__name__)
            times.append(round(time.monotonic() - began, 3))
            time.sleep(0.05)
        closed = 0
        for sock in socks:
            sock.settimeout(0.01)
            try:
                closed += sock.recv(1) == b""
            except (ConnectionResetError, BrokenPipeError):
                closed += 1
            except TimeoutError:
                pass
        time.sleep(0.5)
        grown = log_path.stat().st_size - before
        text = log_path.read_text(errors="replace")
        print(
            json.dumps(
                {
                    "nofile": args.nofile,
                    "sockets": args.sockets,
                    "opened_seconds": round(opened_s, 2),
                    "request_seconds": times,
                    "request_seconds_max": max(times),
                    "failed": failures,
                    "idle_sockets_closed_by_server": closed,
                    "log_bytes_grown": grown,
                    "tracebacks": text.count("Traceback"),
                },
                indent=1,
            )
        )
    finally:
        for sock in socks:
            sock.close()
        terminate(process)


if __name__ == "__main__":
    main()
