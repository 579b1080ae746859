"""The OpenAPI document lists every error an operation answers: each operation read from a real server's
/openapi.json is sent the requests that draw its errors (no key, a key without its scope, a foreign Origin, a
Host the server does not answer for, a key over its quota, a body too large or not JSON, and the operation's own
422 and 404), and every status answered must be one the document lists for it, with the `ErrorBody` schema."""

from __future__ import annotations

import json

import httpx
import pytest
from test_service_helpers import BLOCKS_DOMAIN, config, raw, serve_in_thread

from benchmarks.experiments.validation_flood import wedge

MAX_BODY = 64 * 1024
STEP = {"run_id": "r", "step": 0, "action": "(pick-up a)", "outcome": "success"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, OpenAPI document, keys by name) of a server with a trace store and four keys."""
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    db = str(tmp_path_factory.mktemp("openapi") / "t.db")
    with TraceStore(db) as store:
        keys = {
            "admin": add_key(store, "admin", "a", "admin"),
            "read": add_key(store, "read-only", "a", "read"),
            "metrics": add_key(store, "metrics-only", "a", "metrics"),
            "limited": add_key(store, "limited", "a", "admin", rps=0.01),
        }
    with serve_in_thread(config(traces=db, validate_budget_s=1.0), max_body_bytes=MAX_BODY) as (url, _):
        document = httpx.get(url + "/openapi.json", headers=bearer(keys["admin"]), timeout=30).json()
        yield url, document, keys


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def operations(document: dict) -> list[tuple[str, str, dict]]:
    """(METHOD, path with its parameters filled in, operation) for every operation of the document."""
    found = []
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            found.append((method.upper(), path.replace("{job_id}", "no-such-job"), operation))
    return found


def send(url: str, method: str, path: str, body: bytes | None = None, **headers: str) -> int:
    """The status of one request sent as it is (`raw`), naming the server in Host unless `headers` give one."""
    port = url.rsplit(":", 1)[1]
    return raw(url, method, path, body, timeout=60, **{"Host": f"127.0.0.1:{port}", **headers})[0]


def undocumented(operation: dict, status: int) -> str | None:
    """Why `status` is not documented for `operation` as an error answer (None: it is)."""
    answer = operation["responses"].get(str(status))
    if answer is None:
        return "not listed"
    schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
    if schema.get("$ref") != "#/components/schemas/ErrorBody":
        return f"listed without the ErrorBody schema: {schema}"
    if status in (429, 503) and "Retry-After" not in answer.get("headers", {}):
        return "listed without its Retry-After header"
    return None


def check(misses: list[str], method: str, path: str, operation: dict, status: int, expected: int, how: str) -> None:
    if status != expected:
        misses.append(f"{method} {path} {how}: answered {status}, expected {expected}")
    elif (why := undocumented(operation, status)) is not None:
        misses.append(f"{method} {path} {how}: answered {status}, {why}")


def test_every_error_the_guard_answers_is_documented_on_the_operation(served):
    url, document, keys = served
    misses: list[str] = []
    assert send(url, "GET", "/v1/actions", Authorization=f"Bearer {keys['limited']}") == 200  # its one request
    for method, path, operation in operations(document):
        keyed = "security" in operation
        body_headers = {"Content_Type": "application/json"} if method == "POST" else {}
        body = b"{}" if method == "POST" else None
        admin = {"Authorization": f"Bearer {keys['admin']}"}
        status = send(url, method, path, body, Host="rebound.example", **admin, **body_headers)
        check(misses, method, path, operation, status, 421, "with a foreign Host")
        status = send(url, method, path, body, Origin="https://evil.example", **admin, **body_headers)
        check(misses, method, path, operation, status, 403, "from a foreign Origin")
        if keyed:
            check(misses, method, path, operation, send(url, method, path, body, **body_headers), 401, "without a key")
            scopes = operation["security"][0]["bearer"]
            other = keys["read"] if "metrics" in scopes else keys["metrics"]
            status = send(url, method, path, body, Authorization=f"Bearer {other}", **body_headers)
            check(misses, method, path, operation, status, 403, "with a key without its scope")
            status = send(url, method, path, body, Authorization=f"Bearer {keys['limited']}", **body_headers)
            check(misses, method, path, operation, status, 429, "over the key's quota")
            why = undocumented(operation, 503)  # the keys unreadable just now (a store locked for long)
            if why is not None:
                misses.append(f"{method} {path} behind a key: 503 {why}")
        if "requestBody" in operation:
            large = json.dumps({"padding": "x" * MAX_BODY}).encode()
            status = send(url, method, path, large, Content_Type="application/json", **admin)
            check(misses, method, path, operation, status, 413, "with a body over --max-body")
            status = send(url, method, path, b"a=1", Content_Type="application/x-www-form-urlencoded", **admin)
            check(misses, method, path, operation, status, 415, "with a form body")
    assert not misses, "\n".join(misses)


def test_the_operations_own_errors_are_documented(served):
    """422 where one is answered (a validation too costly to check, an idempotency key reused for other steps),
    404 an unknown run or job; and no 422 where none is (FastAPI documents one on every operation with
    parameters, which this service answers 400 instead)."""
    url, document, keys = served
    documented = {(method, path): operation for method, path, operation in operations(document)}
    misses: list[str] = []
    with httpx.Client(base_url=url, headers=bearer(keys["admin"]), timeout=60) as client:
        keyed = {"Idempotency-Key": "k"}
        drawn = [
            ("POST", "/v1/validate", client.post("/v1/validate", json=wedge(7, 50)), 422),
            ("POST", "/v1/steps", client.post("/v1/steps", json={"steps": [STEP]}, headers=keyed), 200),
            ("POST", "/v1/steps", client.post("/v1/steps", json={"steps": [{**STEP, "step": 1}]}, headers=keyed), 422),
            ("POST", "/v1/replan", client.post("/v1/replan", json={"run_id": "none", "state": []}), 404),
            ("GET", "/v1/jobs/no-such-job", client.get("/v1/jobs/no-such-job"), 404),
            ("POST", "/v1/plan", client.post("/v1/plan", json={"domain": BLOCKS_DOMAIN, "problem": "("}), 400),
        ]
    for method, path, answer, expected in drawn:
        if answer.status_code != 200:
            check(misses, method, path, documented[(method, path)], answer.status_code, expected, answer.text[:80])
    for (method, path), operation in documented.items():
        answer = operation["responses"].get("422")
        if answer is not None and (method, path) not in {("POST", "/v1/validate"), ("POST", "/v1/steps")}:
            misses.append(f"{method} {path} lists a 422 it never answers: {answer}")
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert not misses, "\n".join(misses)
