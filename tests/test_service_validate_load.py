"""Costly validations on a real server (uvicorn on loopback, real validator processes): a check that cannot finish
within the deadline is refused before it starts, saying what, how large and the limit; a check whose client hung
up is stopped and its validator replaced; each caller's validations queue on their own, so one caller's flood
never delays another's check. The serial test holds the whole target: after 20 hostile validations whose clients
gave up, a trivial validate and /v1/steps are answered at once, to the same caller and to another."""

from __future__ import annotations

import concurrent.futures
import socket
import time

import httpx
import pytest
from test_service_helpers import config, serve_in_thread, start_cli_server, wait_for

from benchmarks.experiments.validation_flood import STEP, trivial, wedge

TRIVIAL = trivial()  # blocks 4-0 and a first step of it


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def restarts(url: str, reason: str, headers: dict | None = None) -> float:
    for line in httpx.get(url + "/metrics", headers=headers, timeout=30).text.splitlines():
        if line.startswith(f'portfolio_worker_restarts_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    return 0.0


def send_and_hang_up(url: str, body: dict, headers: dict[str, str]) -> socket.socket:
    """POST `body` to /v1/validate on a raw connection left open (close it to hang up)."""
    import json

    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    data = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sock.sendall(
        f"POST /v1/validate HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n{head}"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def test_a_check_that_cannot_finish_is_refused_before_it_starts_saying_what_how_large_and_the_limit():
    """Before, the 7-variable forall held a validator until the deadline, which then killed it, and the 422
    said only that the deadline passed."""
    with serve_in_thread(config(validate_budget_s=3.0)) as (url, _):
        answer = httpx.post(url + "/v1/validate", json=wedge(7, 50), timeout=60)
        assert answer.status_code == 422 and answer.json()["kind"] == "ValidationTooCostly"
        message = answer.json()["error"]
        assert "7.8e11 condition checks" in message  # how large
        assert "forall (?x1 ?x2 ?x3 ?x4 ?x5 ?x6 ?x7 - obj) in the precondition of go: 50^7" in message  # what
        assert "over the 3,000,000 this server checks within its 3 s (--validate-budget)" in message  # the limit
        assert restarts(url, "timeout") == 0  # no validator was worked to its deadline and killed
        assert httpx.post(url + "/v1/validate", json=TRIVIAL, timeout=60).json()["valid"] is False


def test_a_check_whose_client_hangs_up_is_stopped_and_its_validator_replaced():
    """Before, the check went on to its deadline (a minute here) on a validator nobody was waiting for."""
    with serve_in_thread(config(validate_budget_s=60.0, workers=1)) as (url, svc):
        wait_for(lambda: svc.validators.ready == 1, what="the validator to start")
        sock = send_and_hang_up(url, wedge(5, 30), {})
        try:
            wait_for(lambda: svc.validators.busy == 1, what="the check to start")
        finally:
            sock.close()
        wait_for(lambda: svc.validators.busy == 0, timeout=20, what="the check to stop")
        assert restarts(url, "cancelled") == 1 and restarts(url, "timeout") == 0
        assert httpx.post(url + "/v1/validate", json=TRIVIAL, timeout=60).json()["valid"] is False


def test_one_callers_queue_of_checks_does_not_delay_another_callers_check(tmp_path):
    """Caller A sends three costly checks, caller B one trivial check: B's is answered while A's wait, on the
    validator A may not take. Before, A's checks took both validators and the third queued ahead of B's, which
    waited for a whole deadline (a minute here)."""
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        first, second = add_key(store, "a", "a", "plan"), add_key(store, "b", "b", "plan,metrics")
    with serve_in_thread(config(traces=db, validate_budget_s=60.0, workers=2)) as (url, svc):
        wait_for(lambda: svc.validators.ready == 2, what="the validators to start")
        socks = [send_and_hang_up(url, wedge(5, 30), bearer(first)) for _ in range(3)]
        try:
            wait_for(lambda: svc.validators.busy + svc.validators.queued == 3, what="A's checks to arrive")
            answer = httpx.post(url + "/v1/validate", json=TRIVIAL, headers=bearer(second), timeout=30)
            assert answer.status_code == 200 and answer.json()["valid"] is False
            assert svc.validators.queued == 2  # A's still wait behind A's first
        finally:
            for sock in socks:
                sock.close()
        wait_for(lambda: svc.validators.busy + svc.validators.queued == 0, timeout=20, what="A's checks to stop")


@pytest.mark.serial
def test_after_twenty_hostile_validations_whose_clients_gave_up_the_same_caller_and_another_are_answered_at_once(
    tmp_path,
):
    """The target: `portfolio serve --workers 2` in its own process; caller A sends 20 hostile validations (half a
    7-variable forall over 50 objects, refused at once; half a 5-variable one over 30, within the estimate but
    minutes of work), each client giving up after 1 s. Then a trivial validate and /v1/steps, by A and by B,
    are each answered within 2.5 s (the target is 1 s: docs/benchmarks.md has the measured figures). Before,
    the trivial validate waited for the checks nobody was waiting for (13.2 s measured for four)."""
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        keys = {name: add_key(store, name, name, "plan,steps:write") for name in ("a", "b")}
    server, url = start_cli_server(
        "--workers", "2", "--delegates", "fast-downward", "--traces", db, "--validate-budget", "30", insecure=False
    )
    try:
        hostile = [wedge(7, 50), wedge(5, 30)] * 10
        with concurrent.futures.ThreadPoolExecutor(20) as pool:

            def give_up(body: dict) -> str:
                try:
                    return str(
                        httpx.post(url + "/v1/validate", json=body, headers=bearer(keys["a"]), timeout=1).status_code
                    )
                except httpx.TimeoutException:
                    return "gave up"

            outcomes = list(pool.map(give_up, hostile))
        assert set(outcomes) <= {"gave up", "422"} and "gave up" in outcomes, outcomes
        latencies = {}
        with httpx.Client(base_url=url, timeout=30) as client:
            for name, key in keys.items():
                started = time.monotonic()
                answer = client.post("/v1/validate", json=TRIVIAL, headers=bearer(key))
                latencies[f"validate {name}"] = time.monotonic() - started
                assert answer.status_code == 200 and answer.json()["valid"] is False
                started = time.monotonic()
                answer = client.post("/v1/steps", json={"steps": [STEP]}, headers=bearer(key))
                latencies[f"steps {name}"] = time.monotonic() - started
                assert answer.status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=15)
    assert max(latencies.values()) < 2.5, latencies
