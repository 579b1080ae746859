"""Malformed input over real HTTP (uvicorn on loopback, one keep-alive connection per case): every case the
review found answered 500 is a 400 with a JSON body, and the connection stays open after it, as it does after
a 500 from a handler that raised."""

from __future__ import annotations

import http.client
import json

import pytest
from support import REPO
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, serve_in_thread


def deep(levels: int) -> dict:
    document: dict = {}
    for _ in range(levels):
        document = {"a": document}
    return document


NESTED_AND = BLOCKS_DOMAIN.replace(":precondition (and", ":precondition " + "(and " * 5000 + "(and", 1).replace(
    ":effect", ")" * 5000 + " :effect", 1
)
JSON_TASK = json.loads((REPO / "domains" / "examples" / "blocks-task.json").read_text())
STEP = {"run_id": "r", "step": 1, "action": "pick-up", "args": ["b"], "outcome": "success"}
TASK = {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4}
CASES = [  # (path, body text, kind): each was a 500 (or, for the non-finite numbers, accepted)
    ("/v1/plan", json.dumps({**TASK, "features": deep(900)}), "BadRequest"),
    ("/v1/plan", json.dumps({"task": deep(900)}), "BadRequest"),
    ("/v1/validate", json.dumps({"task": deep(900), "plan": []}), "BadRequest"),
    ("/v1/validate", json.dumps({**TASK, "plan": ["(pick-up \ud800)"]}), "BadRequest"),
    (
        "/v1/plan",
        json.dumps({"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4.replace("(:goal", "; \ud800\n(:goal")}),
        "BadRequest",
    ),
    ("/v1/plan", json.dumps({"domain": NESTED_AND, "problem": BLOCKS_4}), "PDDLSyntaxError"),
    ("/v1/validate", json.dumps({"domain": NESTED_AND, "problem": BLOCKS_4, "plan": []}), "PDDLSyntaxError"),
    ("/v1/steps", json.dumps({"steps": [{**STEP, "step": 2**63}]}), "BadRequest"),
    ("/v1/steps", json.dumps({"steps": [STEP]})[:-2] + ', "duration_ms": NaN}]}', "BadRequest"),
    (
        "/v1/steps",
        json.dumps({"steps": [{**STEP, "features": {"load": 1}}]}).replace("1}}", "Infinity}}"),
        "BadRequest",
    ),
    ("/v1/plan", json.dumps({**TASK, "features": {"x": 1}}).replace('"x": 1', '"x": 1e999'), "BadRequest"),
    # both PDDL texts and a JSON task: the JSON task was planned and the PDDL ignored without a word
    ("/v1/plan", json.dumps({**TASK, "task": JSON_TASK}), "BadRequest"),
    ("/v1/validate", json.dumps({"problem": BLOCKS_4, "task": JSON_TASK, "plan": []}), "BadRequest"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    traces = tmp_path_factory.mktemp("malformed") / "traces.db"
    with serve_in_thread(config(traces=str(traces))) as (url, svc):
        yield url.removeprefix("http://"), svc


def exchange(connection: http.client.HTTPConnection, method: str, path: str, body: str | None = None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    connection.request(method, path, body=body.encode("utf-8", "surrogatepass") if body else None, headers=headers)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


@pytest.mark.parametrize("path, body, kind", CASES, ids=[f"{i}:{c[0]}" for i, c in enumerate(CASES)])
def test_malformed_input_is_a_400_with_a_json_body_and_the_connection_kept(server, path, body, kind):
    host, svc = server
    connection = http.client.HTTPConnection(host, timeout=60)
    try:
        status, answer = exchange(connection, "POST", path, body)
        assert status == 400 and answer["kind"] == kind and answer["error"], answer
        socket = connection.sock
        assert socket is not None  # not closed after the answer
        assert exchange(connection, "GET", "/v1/health")[0] == 200
        assert connection.sock is socket  # the same connection answered
    finally:
        connection.close()
    assert svc.store.db.execute("SELECT count(*) FROM steps").fetchone()[0] == 0


LONG_RUN_ID = "r" * 100_000


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/plan", {**TASK, "run_id": LONG_RUN_ID}),
        ("/v1/replan", {"run_id": LONG_RUN_ID, "state": []}),
        ("/v1/steps", {"steps": [{**STEP, "run_id": LONG_RUN_ID}]}),
    ],
    ids=["plan", "replan", "steps"],
)
def test_a_run_id_longer_than_256_characters_is_refused(server, path, body):
    """Before, a 100,000-character run id was planned under and stored (and /v1/replan looked it up)."""
    host, svc = server
    connection = http.client.HTTPConnection(host, timeout=60)
    try:
        status, answer = exchange(connection, "POST", path, json.dumps(body))
    finally:
        connection.close()
    assert status == 400 and answer["kind"] == "SchemaError", answer
    assert "run_id: String should have at most 256 characters" in answer["error"], answer
    assert svc.store.db.execute("SELECT count(*) FROM steps").fetchone()[0] == 0
    assert LONG_RUN_ID not in svc.memory.runs


@pytest.mark.parametrize("method, path, allow", [("GET", "/v1/plan", "POST"), ("DELETE", "/v1/health", "GET")])
def test_a_405_says_which_methods_the_route_allows(server, method, path, allow):
    """Before, the service's own 405 answer dropped Starlette's `Allow` header (RFC 9110 requires it)."""
    host, _ = server
    connection = http.client.HTTPConnection(host, timeout=60)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 405 and answer["kind"] == "MethodNotAllowed", answer
    assert response.getheader("Allow") == allow


def test_a_handler_that_raises_is_a_500_and_the_connection_is_kept(server):
    """Before, uvicorn dropped the connection after every 500 from an unexpected error (10 of 10 follow-ups
    reset), so a client could not tell whether its /v1/steps batch had landed."""
    host, svc = server
    original = svc.record_steps

    async def broken(body):
        raise RuntimeError("disk on fire")

    svc.record_steps = broken
    connection = http.client.HTTPConnection(host, timeout=60)
    try:
        status, answer = exchange(connection, "POST", "/v1/steps", json.dumps({"steps": [STEP]}))
        assert status == 500 and answer["kind"] == "InternalError"
        socket = connection.sock
        assert socket is not None
        svc.record_steps = original
        assert exchange(connection, "POST", "/v1/steps", json.dumps({"steps": [STEP]})) == (
            200,
            {"recorded": 1, "skipped": 0, "conflicts": []},
        )
        assert connection.sock is socket
    finally:
        svc.record_steps = original
        connection.close()
    svc.store.db.execute("DELETE FROM steps")
    svc.store.db.commit()
