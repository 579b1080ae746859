"""The fleet of docs/deployment.md, run without Docker: the `portfolio` commands of docs/examples/fleet/compose.yaml
(the key made once, two `serve` replicas) run as they are written, against a throw-away PostgreSQL database of a
role that logs in with a password, on loopback (what compose.yaml's network would give them: the database's URL,
the bind address and the port are put in; one planner worker a replica, to spare the machine). A plan made on one
replica is recorded and replanned on the other, a replica's death leaves the other serving, and each replica's
health answers the Caddyfile's check (its Host header, its URI, the body it expects) as a healthy upstream."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from support import REPO, wait_until
from test_service_runs import TRIP_BODY, TRIP_PLAN, TRIP_TASK, recorded, state_after

from portfolio.planner import REUSE_DELEGATE
from traces import TraceStore
from traces.targets import split_password

FLEET = REPO / "docs" / "examples" / "fleet"
COMPOSE_URL = "postgresql://planner@postgres:5432/traces"  # the store as compose.yaml names it


def services() -> dict[str, dict]:
    return yaml.safe_load((FLEET / "compose.yaml").read_text())["services"]


def caddy_check() -> dict[str, str]:
    """What the Caddyfile's active health check asks of an upstream: its URI, Host header and body (a regex), and
    the upstreams it balances."""
    text = (FLEET / "Caddyfile").read_text()
    found = {
        "uri": re.search(r"health_uri (\S+)", text),
        "host": re.search(r"health_headers \{\s*Host (\S+)", text),
        "body": re.search(r'health_body "((?:[^"\\]|\\.)*)"', text),
        "upstreams": re.search(r"reverse_proxy ([^{]+)\{", text),
    }
    assert all(found.values()), found
    return {
        "uri": found["uri"][1],  # type: ignore[index]
        "host": found["host"][1],  # type: ignore[index]
        "body": found["body"][1].replace('\\"', '"'),  # type: ignore[index]
        "upstreams": found["upstreams"][1].strip(),  # type: ignore[index]
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def on_loopback(command: list[str], url: str, port: int | None = None) -> list[str]:
    """A compose command as this machine runs it: `portfolio` as this interpreter's module, the store's URL, the
    loopback address and `port` put in, one planner worker."""
    assert command[0] == "portfolio" and COMPOSE_URL in command, command
    swapped = {COMPOSE_URL: url, "0.0.0.0": "127.0.0.1"}
    argv = [swapped.get(word, word) for word in command[1:]]
    for option, value in (("--port", port), ("--workers", 1)):
        if option in argv and value is not None:
            argv[argv.index(option) + 1] = str(value)
    return [sys.executable, "-m", "portfolio.cli", *argv]


@pytest.fixture
def fleet(postgres_cluster, tmp_path: Path):
    """(key, [replica base URLs], [their processes], the store's URL): the compose file's key made and its two
    replicas started, the password only in PGPASSWORD, as compose.yaml gives it."""
    url, password = split_password(postgres_cluster.database_with_password("fleetdocs", "pw-fleet-31c"))
    assert password is not None
    env = {**os.environ, "PYTHONPATH": str(REPO), "PGPASSWORD": password}
    found = services()
    made = subprocess.run(
        on_loopback(found["keys"]["command"], url), env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    replicas = [name for name, service in found.items() if service.get("command", [None, None])[1] == "serve"]
    assert replicas == ["planner-1", "planner-2"]
    processes, bases = [], []
    try:
        for name in replicas:
            port = free_port()
            command = on_loopback(found[name]["command"], url, port)
            log = (tmp_path / f"{name}.log").open("w")  # a file, not a pipe: nothing here reads it until the end
            processes.append(subprocess.Popen(command, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT))
            bases.append(f"http://127.0.0.1:{port}")
        for base in bases:
            wait_until(lambda b=base: ready(b), 120, f"the replica at {base} to start")
        yield key, bases, processes, url
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)


def ready(base: str) -> bool:
    try:
        health = httpx.get(base + "/v1/health", timeout=5).json()
    except httpx.TransportError:
        return False
    return health["ready"] == health["workers"]


def test_the_fleet_of_the_deployment_page_shares_one_store_across_its_replicas(fleet):
    key, (first, second), processes, url = fleet
    check = caddy_check()
    assert check["upstreams"] == "planner-1:8765 planner-2:8765"
    for base in (first, second):  # what Caddy asks of each upstream, answered as a healthy one
        health = httpx.get(base + check["uri"], headers={"Host": check["host"]}, timeout=10)
        assert health.status_code == 200 and re.search(check["body"], health.text), health.text
    bearer = {"Authorization": f"Bearer {key}"}
    assert httpx.post(first + "/v1/plan", json=TRIP_BODY, timeout=60).status_code == 401  # keys are required

    run = "fleet-trip"
    planned = httpx.post(first + "/v1/plan", json=TRIP_BODY | {"run_id": run}, headers=bearer, timeout=60)
    assert planned.status_code == 200 and planned.json()["plan"] == TRIP_PLAN, planned.text
    steps = {"steps": recorded(run, TRIP_PLAN[:3], ["success"] * 3)}
    posted = httpx.post(second + "/v1/steps", json=steps, headers=bearer | {"Idempotency-Key": "trip-1"}, timeout=30)
    assert posted.status_code == 200 and posted.json()["recorded"] == 3, posted.text
    again = httpx.post(first + "/v1/steps", json=steps, headers=bearer | {"Idempotency-Key": "trip-1"}, timeout=30)
    assert again.json() == posted.json()  # a retry that reaches the other replica is answered as the first time

    processes[0].kill()  # a replica dies: the other serves the run it never saw planned
    processes[0].wait(timeout=30)
    state = state_after(TRIP_TASK, TRIP_PLAN[:3])
    replanned = httpx.post(second + "/v1/replan", json={"run_id": run, "state": state}, headers=bearer, timeout=60)
    assert replanned.status_code == 200, replanned.text
    assert replanned.json()["delegate"] == REUSE_DELEGATE and replanned.json()["plan"] == ["(charge-card)"]
    assert httpx.get(second + "/v1/health", timeout=10).json()["status"] == "ok"
    with TraceStore(url.replace("postgresql://fleetdocs@", "postgresql://postgres@")) as store:
        assert store.count_steps(tenant="acme") == 3 and len(store.plans(f"@acme/{run}")) == 2
