"""The HTTP service: FastAPI over a `Service` (pool of warm planner workers), served by uvicorn.

    POST /v1/plan      PlanBody -> 200 PlanResponse (the CLI's --json PlanResult + run_id); "wait": false -> 202 Job
    POST /v1/replan    run_id + observed state -> 200 PlanResponse (or 202 Job)
    POST /v1/validate  task + plan -> 200 Verdict (the validator's verdict and critique)
    POST /v1/steps     {"steps": [StepRecord...]} -> 200 {"recorded": n, "skipped": n, "conflicts": [...]}
    GET  /v1/actions   per-action stats and current p_fail
    POST /v1/retrain   -> 202 Job (fit the next failure and selection models on a worker);  GET /v1/jobs/{id} -> Job
    GET  /v1/health    (no token needed);  GET /metrics (Prometheus);  /openapi.json, /docs;  /mcp (MCP)

Errors are JSON `{"error", "kind"}` whatever happens: 400 bad input (`kind` names the error type: PDDLSyntaxError,
SchemaError, ...), 401 without the token, 404, 413 body too large, 500 a planner worker died or hung (it was
replaced; the reason says why), 503 + Retry-After when the queue is full or the trace store is locked. A handler
that raises anything else is answered 500 too, never with a dropped connection.

Auth and limits are plain ASGI middleware around the whole app, the MCP endpoint included: `Authorization:
Bearer TOKEN` compared in constant time (`secrets.compare_digest`) on every path but /v1/health, and the body
size checked from Content-Length, or while a chunked body is read in before the app sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from domains.errors import TaskInputError
from portfolio.serve.metrics import route_label
from portfolio.serve.models import (
    ActionsResponse,
    BadRequest,
    ErrorBody,
    HealthResponse,
    Job,
    PlanBody,
    PlanResponse,
    ReplanBody,
    RetrainBody,
    StepsBody,
    StepsResponse,
    ValidateBody,
    Verdict,
)
from portfolio.serve.pool import PlannerFailed, QueueFull
from portfolio.serve.service import NotFound, Service

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
OPEN_PATHS = frozenset({"/v1/health"})
ERRORS = {400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 500: {"model": ErrorBody},
          503: {"model": ErrorBody}}


def _json_error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "kind": kind}, status_code=status, headers=headers)


async def _send_json(send, status: int, payload: dict[str, Any], headers: list | None = None) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Outermost ASGI middleware: counts every request by route and status, checks the bearer token and the
    body size. One class so that a 401 or a 413 is counted like any other answer."""

    def __init__(self, app, service: Service, token: str | None, max_body_bytes: int) -> None:
        self.app, self.service, self.max_body_bytes = app, service, max_body_bytes
        self.expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 500}

        async def counting_send(message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, counting_send)
        finally:
            self.service.metrics.requests.labels(route_label(scope["path"]), str(status["code"])).inc()

    async def _guarded(self, scope, receive, send) -> None:
        headers = dict(scope["headers"])
        if self.expected is not None and scope["path"] not in OPEN_PATHS:
            if not secrets.compare_digest(headers.get(b"authorization", b""), self.expected):
                await _send_json(send, 401, {"error": "missing or wrong bearer token (Authorization: Bearer ...)",
                                             "kind": "Unauthorized"}, [(b"www-authenticate", b"Bearer")])
                return
        if scope["path"].startswith("/v1/") and headers.get(b"content-type", b"").startswith(
                b"application/x-www-form-urlencoded"):
            # `curl -d` labels JSON as a form; every /v1 body is JSON, so read it as such.
            scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k != b"content-type"]
                         + [(b"content-type", b"application/json")])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await _send_json(send, 413, {"error": f"request body over {self.max_body_bytes} bytes",
                                         "kind": "BodyTooLarge"})
            return
        if b"chunked" in headers.get(b"transfer-encoding", b""):
            await self._buffered(scope, receive, send)
        else:  # the HTTP server holds the body to its Content-Length, checked above
            await self.app(scope, receive, send)

    async def _buffered(self, scope, receive, send) -> None:
        """A chunked body (no Content-Length): read it up to the limit before the app sees it."""
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await _send_json(send, 413, {"error": f"request body over {self.max_body_bytes} bytes",
                                             "kind": "BodyTooLarge"})
                return
            if not message.get("more_body"):
                break
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


def _pydantic_message(error: ValidationError | RequestValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"] if p != "body") or "body"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def _install_error_handlers(app: FastAPI) -> None:
    from traces.errors import DatabaseLockedError, TraceStoreError

    @app.exception_handler(RequestValidationError)
    async def schema_error(request: Request, error: RequestValidationError) -> JSONResponse:
        invalid = [item for item in error.errors() if item.get("type") == "json_invalid"]
        if invalid:
            where, why = invalid[0]["loc"][-1], invalid[0].get("ctx", {}).get("error", "invalid JSON")
            return _json_error(400, f"body is not JSON: {why} at character {where}", "BadRequest")
        return _json_error(400, _pydantic_message(error), "SchemaError")

    @app.exception_handler(ValidationError)
    async def model_error(request: Request, error: ValidationError) -> JSONResponse:
        return _json_error(400, _pydantic_message(error), "SchemaError")

    @app.exception_handler(BadRequest)
    @app.exception_handler(TaskInputError)
    async def bad_input(request: Request, error: Exception) -> JSONResponse:
        return _json_error(400, str(error), getattr(error, "kind", type(error).__name__))

    @app.exception_handler(NotFound)
    async def not_found(request: Request, error: NotFound) -> JSONResponse:
        return _json_error(404, str(error), "NotFound")

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, error: QueueFull) -> JSONResponse:
        return _json_error(503, str(error), "QueueFull", {"Retry-After": "1"})

    @app.exception_handler(PlannerFailed)
    async def planner_failed(request: Request, error: PlannerFailed) -> JSONResponse:
        return _json_error(500, str(error), "PlannerFailed")

    @app.exception_handler(TraceStoreError)
    async def store_error(request: Request, error: TraceStoreError) -> JSONResponse:
        if isinstance(error, DatabaseLockedError):
            return _json_error(503, str(error), type(error).__name__, {"Retry-After": "1"})
        return _json_error(500, str(error), type(error).__name__)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(error.status_code, "HTTPError")
        message = f"no route {request.method} {request.url.path}" if error.status_code in (404, 405) else str(
            error.detail)
        return _json_error(error.status_code, message, kind)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        log.error("unhandled error on %s", request.url.path, exc_info=error)
        return _json_error(500, f"internal error: {type(error).__name__}: {error}", "InternalError")


def _job_response(job: Job) -> JSONResponse:
    return JSONResponse(job.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})


def create_app(service: Service, token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES,
               host: str = "127.0.0.1", stop_s: float = 1.0):
    """The ASGI app: FastAPI routes plus the MCP endpoint, inside the `Guard` middleware. Starting it (the
    lifespan) starts the planner workers; stopping it stops them."""
    from portfolio.serve.mcp_server import build_mcp

    mcp = build_mcp(service)
    mcp_routes = mcp.streamable_http_app(streamable_http_path="/mcp", host=host).routes

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if service.pool is None:
            service.start()
        watcher = asyncio.get_running_loop().create_task(service.watch())
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            watcher.cancel()
            service.close(stop_s)

    app = FastAPI(title="portfolio-planner", version="0.1.0", lifespan=lifespan,
                  description="Validated plans from a pool of warm planners; learned action costs from traces.")
    _install_error_handlers(app)

    @app.post("/v1/plan", response_model=PlanResponse, responses={202: {"model": Job}, **ERRORS})
    async def plan(body: PlanBody):
        if not body.wait:
            return _job_response(service.submit("plan", lambda: service.plan(body)))
        return await service.plan(body)

    @app.post("/v1/replan", response_model=PlanResponse, responses={202: {"model": Job}, 404: {"model": ErrorBody},
                                                                     **ERRORS})
    async def replan(body: ReplanBody):
        if not body.wait:
            await service.run_source(body.run_id)  # an unknown run is a 404 now, not a failed job later
            return _job_response(service.submit("replan", lambda: service.replan(body)))
        return await service.replan(body)

    @app.post("/v1/validate", response_model=Verdict, responses=ERRORS)
    async def validate(body: ValidateBody) -> Verdict:
        return await service.validate(body)

    @app.post("/v1/steps", response_model=StepsResponse, responses=ERRORS)
    async def steps(body: StepsBody) -> StepsResponse:
        return await service.record_steps(body)

    @app.get("/v1/actions", response_model=ActionsResponse, responses=ERRORS)
    async def actions() -> ActionsResponse:
        return await service.actions()

    @app.post("/v1/retrain", status_code=202, response_model=Job, responses=ERRORS)
    async def retrain(body: RetrainBody | None = None):
        service.need_store()
        return _job_response(service.submit("retrain", lambda: service.retrain(body or RetrainBody())))

    @app.get("/v1/jobs/{job_id}", response_model=Job, responses={404: {"model": ErrorBody}})
    async def job(job_id: str) -> Job:
        return service.job(job_id)

    @app.get("/v1/health", response_model=HealthResponse)
    async def health() -> HealthResponse:
        return service.health()

    @app.get("/metrics", response_class=Response)
    async def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app.router.routes.extend(mcp_routes)
    return Guard(app, service, token, max_body_bytes)
