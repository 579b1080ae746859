"""The HTTP service: FastAPI over a `Service` (pool of warm planner workers), served by uvicorn.

    POST /v1/plan      PlanBody -> 200 PlanResponse (the CLI's --json PlanResult + run_id); "wait": false -> 202 Job
    POST /v1/replan    run_id + observed state -> 200 PlanResponse (or 202 Job)
    POST /v1/validate  task + plan -> 200 Verdict (the validator's verdict and critique)
    POST /v1/steps     {"steps": [StepRecord...]} -> 200 {"recorded": n, "skipped": n, "conflicts": [...]}
    GET  /v1/actions   per-action stats and current p_fail
    POST /v1/retrain   -> 202 Job (fit the next failure and selection models on a worker);  GET /v1/jobs/{id} -> Job
    GET  /v1/health    (no token needed);  GET /metrics (Prometheus);  /openapi.json, /docs;  /mcp (MCP)

Errors are JSON `{"error", "kind"}` whatever happens: 400 bad input (`kind` names the error type: PDDLSyntaxError,
SchemaError, ...), 401 without the token, 404, 413 body too large, 422 a validation too costly to finish
(`ValidationTooCostly`: over --validate-budget or the memory cap), 500 a planner worker died or hung (it was
replaced; the reason says why), 503 + Retry-After when the queue is full, the trace store is locked or too
many large bodies are in flight (`BusyWithLargeBodies`), 503
without it when the stored model cannot be read (`ModelFormatError`: retrain). A handler that raises anything
else is answered 500 too, never with a dropped connection.

Auth and limits are plain ASGI middleware around the whole app, the MCP endpoint included: `Authorization:
Bearer TOKEN` (the scheme in any case) compared in constant time (`secrets.compare_digest`) on every path but
/v1/health, the body size checked from Content-Length and again while the body is read in, and a JSON body
screened for nesting depth, 64-bit integers, finite numbers and Unicode text (`portfolio.serve.screen`)
before the app sees it.
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
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from domains.errors import TaskInputError
from portfolio.serve.metrics import route_label
from portfolio.serve.models import (
    ActionsResponse,
    BadRequest,
    CostsBody,
    CostsResponse,
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
from portfolio.serve.service import NotFound, Service, Unavailable

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
LARGE_BODY_BYTES = 1024 * 1024  # bodies from this size on count against the Guard's budget for large bodies
OPEN_PATHS = frozenset({"/v1/health"})
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody},
    401: {"model": ErrorBody},
    422: {"model": ErrorBody},
    500: {"model": ErrorBody},
    503: {"model": ErrorBody},
}


def _json_error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "kind": kind}, status_code=status, headers=headers)


async def _send_json(send, status: int, payload: dict[str, Any], headers: list | None = None) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Outermost ASGI middleware: counts every request by route and status, checks the bearer token and the
    body size, and screens a JSON body (`portfolio.serve.screen`) before the app sees it. One class so that a
    401, 413 or screening 400 is counted like any other answer.

    It also keeps the connection: uvicorn closes a keep-alive connection whenever the app raises, even after
    the answer was sent (Starlette re-raises past its 500 handler), so a client retrying a /v1/steps batch
    after a 500 could not tell whether it had landed. An exception stops here: answered 500 if nothing was
    sent yet, logged either way, never raised to the server."""

    def __init__(
        self, app, service: Service, token: str | None, max_body_bytes: int, large_body_budget: int | None = None
    ) -> None:
        import anyio

        self.app, self.service, self.max_body_bytes = app, service, max_body_bytes
        self.token = token.encode() if token else None
        self._screening = anyio.CapacityLimiter(2)  # large bodies walked on threads, two at a time
        # Large bodies in flight at once, in bytes: the server holds a body several times over while it reads,
        # screens, parses and hands it on (~6.5x measured: ten 30 MB validations at once took it to 1.9 GB,
        # over a 1 GB --memory-limit). Beyond this, a large body is refused with 503 + Retry-After before it
        # is read; small ones never are.
        self.large_budget = large_body_budget or max(max_body_bytes, service.config.memory_limit_mb * 1024 * 1024 // 10)
        self._large_in_flight = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 500, "started": False}

        async def counting_send(message) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["started"] = message["status"], True
            await send(message)

        try:
            await self._guarded(scope, receive, counting_send)
        except Exception as error:
            log.error("unhandled error on %s", scope["path"], exc_info=error)
            if not status["started"]:
                await _send_json(
                    counting_send, 500, {"error": f"internal error: {type(error).__name__}", "kind": "InternalError"}
                )
        finally:
            self.service.metrics.requests.labels(route_label(scope["path"]), str(status["code"])).inc()

    def _authorized(self, header: bytes) -> bool:
        """`Bearer TOKEN`, the scheme in any case (RFC 7235: auth schemes are case-insensitive); the token
        compared in constant time."""
        scheme, _, credentials = header.partition(b" ")
        return scheme.lower() == b"bearer" and secrets.compare_digest(credentials.strip(b" "), self.token or b"")

    async def _guarded(self, scope, receive, send) -> None:
        headers = dict(scope["headers"])
        if self.token is not None and scope["path"] not in OPEN_PATHS:
            if not self._authorized(headers.get(b"authorization", b"")):
                await _send_json(
                    send,
                    401,
                    {"error": "missing or wrong bearer token (Authorization: Bearer ...)", "kind": "Unauthorized"},
                    [(b"www-authenticate", b"Bearer")],
                )
                return
        if scope["path"].startswith("/v1/") and headers.get(b"content-type", b"").startswith(
            b"application/x-www-form-urlencoded"
        ):
            # `curl -d` labels JSON as a form; every /v1 body is JSON, so read it as such.
            scope = dict(
                scope,
                headers=[(k, v) for k, v in scope["headers"] if k != b"content-type"]
                + [(b"content-type", b"application/json")],
            )
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await _send_json(
                send, 413, {"error": f"request body over {self.max_body_bytes} bytes", "kind": "BodyTooLarge"}
            )
            return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        # a chunked body has no length to go by: it counts as the largest allowed
        size = int(length) if length is not None and length.isdigit() else self.max_body_bytes
        if size < LARGE_BODY_BYTES:
            await self._screened(scope, receive, send)
            return
        if self._large_in_flight + size > self.large_budget:
            await _send_json(
                send,
                503,
                {
                    "error": f"the server is busy with {self._large_in_flight // 2**20} MB of "
                    "large request bodies; retry shortly",
                    "kind": "BusyWithLargeBodies",
                },
                [(b"retry-after", b"1")],
            )
            return
        self._large_in_flight += size
        try:
            await self._screened(scope, receive, send)
        finally:
            self._large_in_flight -= size

    async def _screened(self, scope, receive, send) -> None:
        """Read the body in (up to the limit: a chunked one has no Content-Length to check first), screen it,
        and hand it to the app."""
        import anyio

        from portfolio.serve.screen import NOT_JSON, BodyRejected, screen

        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await _send_json(
                    send, 413, {"error": f"request body over {self.max_body_bytes} bytes", "kind": "BodyTooLarge"}
                )
                return
            if not message.get("more_body"):
                break
        data = bytes(body)
        del body  # one copy of a large body, not two
        try:
            if len(data) < 256 * 1024:
                document = screen(data)
            else:
                document = await anyio.to_thread.run_sync(screen, data, limiter=self._screening)
        except BodyRejected as error:
            await _send_json(send, 400, {"error": str(error), "kind": "BadRequest"})
            return
        if document is not NOT_JSON:  # for routes that validate it off the loop (/v1/steps)
            scope = dict(scope, state={**scope.get("state", {}), "screened_json": document})
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": data, "more_body": False}

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
        return _json_error(getattr(error, "status", 400), str(error), getattr(error, "kind", type(error).__name__))

    @app.exception_handler(NotFound)
    async def not_found(request: Request, error: NotFound) -> JSONResponse:
        return _json_error(404, str(error), "NotFound")

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, error: QueueFull) -> JSONResponse:
        return _json_error(503, str(error), "QueueFull", {"Retry-After": "1"})

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, error: Unavailable) -> JSONResponse:
        return _json_error(503, str(error), error.kind)

    @app.exception_handler(PlannerFailed)
    async def planner_failed(request: Request, error: PlannerFailed) -> JSONResponse:
        return _json_error(500, str(error), "PlannerFailed")

    @app.exception_handler(TraceStoreError)
    async def store_error(request: Request, error: TraceStoreError) -> JSONResponse:
        from learning.storage import ModelFormatError

        if isinstance(error, DatabaseLockedError):
            return _json_error(503, str(error), type(error).__name__, {"Retry-After": "1"})
        if isinstance(error, ModelFormatError):  # not the request's fault, nor transient: an operator must act
            return _json_error(503, str(error), type(error).__name__)
        return _json_error(500, str(error), type(error).__name__)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(error.status_code, "HTTPError")
        message = (
            f"no route {request.method} {request.url.path}" if error.status_code in (404, 405) else str(error.detail)
        )
        return _json_error(error.status_code, message, kind)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        log.error("unhandled error on %s", request.url.path, exc_info=error)
        return _json_error(500, f"internal error: {type(error).__name__}: {error}", "InternalError")


def _job_response(job: Job) -> JSONResponse:
    return JSONResponse(job.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})


def create_app(
    service: Service,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    host: str = "127.0.0.1",
    stop_s: float = 1.0,
    large_body_budget: int | None = None,
):
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

    app = FastAPI(
        title="portfolio-planner",
        version="0.1.0",
        lifespan=lifespan,
        description="Validated plans from a pool of warm planners; learned action costs from traces.",
    )
    _install_error_handlers(app)

    @app.post("/v1/plan", response_model=PlanResponse, responses={202: {"model": Job}, **ERRORS})
    async def plan(body: PlanBody):
        if not body.wait:
            return _job_response(service.submit("plan", lambda: service.plan(body)))
        return await service.plan(body)

    @app.post(
        "/v1/replan", response_model=PlanResponse, responses={202: {"model": Job}, 404: {"model": ErrorBody}, **ERRORS}
    )
    async def replan(body: ReplanBody):
        if not body.wait:
            await service.run_source(body.run_id)  # an unknown run is a 404 now, not a failed job later
            return _job_response(service.submit("replan", lambda: service.replan(body)))
        return await service.replan(body)

    @app.post("/v1/costs", response_model=CostsResponse, responses=ERRORS)
    async def costs(body: CostsBody) -> CostsResponse:
        """The learned cost of every grounded action of the task (as `portfolio costs`): base cost, p_fail and
        the cost plans pay, dearest first."""
        return await service.costs(body)

    @app.post("/v1/validate", response_model=Verdict, responses=ERRORS)
    async def validate(body: ValidateBody) -> Verdict:
        return await service.validate(body)

    # The body is validated on a thread in batches (`steps_body`), not by FastAPI on the event loop: a 30 MB
    # batch held the loop for seconds. The schema is still published (`_publish`).
    @app.post(
        "/v1/steps",
        response_model=StepsResponse,
        responses=ERRORS,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/StepsBody"}}},
            }
        },
    )
    async def steps(request: Request) -> StepsResponse:
        import anyio

        from portfolio.serve.screen import NOT_JSON

        document = getattr(request.state, "screened_json", NOT_JSON)
        if document is NOT_JSON:
            raw = await request.body()
            if raw.strip():
                try:
                    json.loads(raw)
                except (ValueError, RecursionError) as error:
                    where = f" at character {error.pos}" if isinstance(error, json.JSONDecodeError) else ""
                    raise BadRequest(f"body is not JSON{where}") from None
            document = None
        from portfolio.serve.screen import steps_body

        body = await anyio.to_thread.run_sync(steps_body, document)
        return await service.record_steps(body)

    @app.get("/v1/actions", response_model=ActionsResponse, responses=ERRORS)
    async def actions() -> ActionsResponse:
        return await service.actions()

    @app.post("/v1/retrain", status_code=202, response_model=Job, responses=ERRORS)
    async def retrain(body: RetrainBody | None = None):
        service.need_store()
        return _job_response(service.submit_retrain(body or RetrainBody()))

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
    _publish(app, StepsBody)
    return Guard(app, service, token, max_body_bytes, large_body_budget)


def _publish(app: FastAPI, *models: type[BaseModel]) -> None:
    """Add `models`' JSON Schemas to the OpenAPI components (for routes that take the raw request)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in models:
                definition = model.model_json_schema(ref_template="#/components/schemas/{model}")
                for name, sub in definition.pop("$defs", {}).items():
                    components.setdefault(name, sub)
                components[model.__name__] = definition
        return app.openapi_schema or schema

    # FastAPI's documented way to extend the schema is to replace `app.openapi`; the alternative is a subclass
    app.openapi = openapi  # type: ignore[method-assign]
