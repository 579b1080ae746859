"""HTTP/JSON service: one warm `Planner` behind a small JSON API, for runtimes in other languages.

    POST /v1/plan    {"domain": PDDL, "problem": PDDL} or {"task": <JSON task>}, optional "init" (atoms in PDDL
                     form, to plan from another state), "excluded" (grounded actions), "critiques", "features"
                     (the situation learned costs depend on), "explore" (mean, thompson, ucb)
                     -> 200 PlanResult; 400 {"error", "kind"} for bad input
    POST /v1/steps   {"steps": [StepRecord, ...]} -> 200 {"recorded": n} (needs a trace store)
    GET  /v1/health  -> 200 {"status": "ok"}

Standard library `http.server`: the API is three routes and the planner does the work. Planning calls are
serialised (one cascade, one set of warm workers); the budget bounds each call.
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from domains.errors import TaskInputError
from domains.literals import parse_ground_atoms
from portfolio.planner import Planner

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024


class PlanBody(BaseModel):
    domain: str | None = None
    problem: str | None = None
    task: dict[str, Any] | None = None
    init: list[str] | None = None
    excluded: list[str] = []
    critiques: list[str] = []
    features: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, description='the situation learned costs depend on, e.g. {"weather": "rain"}')
    explore: Literal["mean", "thompson", "ucb"] | None = Field(
        default=None, description="how learned costs explore; default: the server's")


class BadRequest(Exception):
    def __init__(self, message: str, kind: str = "BadRequest") -> None:
        super().__init__(message)
        self.kind = kind


def plan_request(planner: Planner, body: PlanBody) -> dict[str, Any]:
    """Handle one /v1/plan body: the library call behind the route."""
    from domains.json_task import task_from_json
    from domains.pddl import parse_task

    if body.task is not None:
        task = task_from_json(json.dumps(body.task), "request.task")
    elif body.domain and body.problem:
        task = parse_task(body.domain, body.problem, "request.domain", "request.problem")
    else:
        raise BadRequest('give "domain" and "problem" (PDDL texts) or "task" (a JSON task)')
    init = parse_ground_atoms(task, body.init) if body.init is not None else None
    result = planner.plan(task, init=init, excluded=body.excluded, critiques=body.critiques,
                          features=body.features or None, explore=body.explore)
    return result.model_dump(mode="json")


def make_server(planner: Planner, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        server_version = "portfolio-planner"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.info("%s %s", self.address_string(), format % args)

        def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                raise BadRequest(f"request body over {MAX_BODY_BYTES} bytes")
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as error:
                raise BadRequest(f"body is not JSON: {error.msg} at line {error.lineno} column {error.colno}")
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object")
            return body

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path == "/v1/health":
                self._send(HTTPStatus.OK, {"status": "ok"})
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}", "kind": "NotFound"})

        def do_POST(self) -> None:  # noqa: N802
            try:
                if self.path == "/v1/plan":
                    body = PlanBody.model_validate(self._body())
                    with lock:
                        payload = plan_request(planner, body)
                    self._send(HTTPStatus.OK, payload)
                elif self.path == "/v1/steps":
                    self._send(HTTPStatus.OK, {"recorded": record_steps(planner, self._body())})
                else:
                    self._send(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}", "kind": "NotFound"})
            except (TaskInputError, BadRequest) as error:
                kind = getattr(error, "kind", type(error).__name__)
                self._send(HTTPStatus.BAD_REQUEST, {"error": str(error), "kind": kind})
            except ValidationError as error:
                self._send(HTTPStatus.BAD_REQUEST, {"error": _pydantic_message(error), "kind": "SchemaError"})

    return ThreadingHTTPServer((host, port), Handler)


def record_steps(planner: Planner, body: dict[str, Any]) -> int:
    from traces.records import StepRecord

    if planner.store is None:
        raise BadRequest("this server has no trace store: start it with --traces PATH")
    steps = body.get("steps")
    if not isinstance(steps, list):
        raise BadRequest('give "steps": a list of step records (see `portfolio schema step`)')
    records = [StepRecord.model_validate(step) for step in steps]
    planner.store.record_steps(records)
    return len(records)


def _pydantic_message(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "body"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)
