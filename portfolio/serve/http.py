"""The HTTP service: FastAPI over a `Service` (pool of warm planner workers), served by uvicorn.

    POST /v1/plan      PlanBody -> 200 PlanResponse (the CLI's --json PlanResult + run_id); "wait": false -> 202 Job
    POST /v1/replan    run_id + observed state -> 200 PlanResponse (or 202 Job); never a step that ran
    POST /v1/validate  task + plan -> 200 Verdict (the validator's verdict and critique)
    POST /v1/steps     {"steps": [StepRecord...]} -> 200 {"recorded": n, "skipped": n, "conflicts": [...]};
                       Idempotency-Key: a retried batch answered as the first time
    GET  /v1/actions   per-action stats and current p_fail
    POST /v1/retrain   -> 202 Job (fit the next failure and selection models on a worker);  GET /v1/jobs/{id} -> Job
    GET  /v1/health    (no token needed);  GET /metrics (Prometheus);  /openapi.json, /docs;  /mcp (MCP)

/docs is Swagger UI with its JavaScript and CSS served from /docs/assets/ (`docs_routes`, FastAPI's documented
self-hosting recipe, the files of the fastapi-offline package), so it renders with no network beyond the
service. With a token, `public_docs` lets GET /docs, /docs/assets/... and /openapi.json through without it.

Errors are JSON `{"error", "kind"}` whatever happens: 400 bad input (`kind` names the error type: PDDLSyntaxError,
SchemaError, ...), 401 without the token, 404, 413 body too large, 422 a validation too costly to finish
(`ValidationTooCostly`: over --validate-budget or the memory cap), 500 a planner worker died or hung (it was
replaced; the reason says why), 503 + Retry-After when the queue is full, the trace store is locked or too
many large bodies are in flight (`BusyWithLargeBodies`), 503
without it when the stored model cannot be read (`ModelFormatError`: retrain). A handler that raises anything
else is answered 500 too, never with a dropped connection.

Errors are answered by `portfolio.serve.errors`; auth and limits are `portfolio.serve.guard.Guard`, plain ASGI
middleware around the whole app, the MCP endpoint included: `Authorization:
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
from typing import Annotated, Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from portfolio.serve.errors import install_error_handlers
from portfolio.serve.guard import MAX_BODY_BYTES, Guard
from portfolio.serve.models import (
    IDEMPOTENCY_HELP,
    MAX_IDEMPOTENCY_KEY,
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
from portfolio.serve.service import Service

log = logging.getLogger(__name__)

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody},
    401: {"model": ErrorBody},
    422: {"model": ErrorBody},
    500: {"model": ErrorBody},
    503: {"model": ErrorBody},
}


def _job_response(job: Job) -> JSONResponse:
    return JSONResponse(job.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})


def create_app(
    service: Service,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    host: str = "127.0.0.1",
    stop_s: float = 1.0,
    large_body_budget: int | None = None,
    public_docs: bool = False,
):
    """The ASGI app: FastAPI routes plus the MCP endpoint, inside the `Guard` middleware. Starting it (the
    lifespan) starts the planner workers; stopping it stops them. `public_docs`: with a token, the docs and the
    schema are read without it (`Guard`); every operation still needs it."""
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
        docs_url=None,  # served by `docs_routes`, from local files instead of a CDN
        redoc_url=None,
    )
    install_error_handlers(app)
    docs_routes(app)

    @app.post("/v1/plan", response_model=PlanResponse, responses={202: {"model": Job}, **ERRORS})
    async def plan(body: PlanBody):
        if not body.wait:
            return _job_response(service.submit("plan", lambda: service.plan(body)))
        return await service.plan(body)

    @app.post(
        "/v1/replan", response_model=PlanResponse, responses={202: {"model": Job}, 404: {"model": ErrorBody}, **ERRORS}
    )
    async def replan(body: ReplanBody):
        """Plan the run's task again from the observed `state`. What is still valid of the plan being executed is
        returned as `plan-reuse`, but never a step that ran: by default that plan is the one this service last
        handed out for the run, less the steps recorded for the run since (POST /v1/steps: record them before
        replanning); a runtime that keeps its own state sends `previous_plan` and `executed` instead."""
        if not body.wait:
            await service.run_source(body.run_id)  # an unknown run is a 404 now, not a failed job later
            return _job_response(service.submit("replan", lambda: service.replan(body)))
        return await service.replan(body)

    @app.post("/v1/costs", response_model=CostsResponse, responses=ERRORS)
    async def costs(body: CostsBody) -> CostsResponse:
        """The learned cost of every grounded action of the task (as `portfolio costs`): base cost, p_fail and
        the cost plans pay, riskiest first."""
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
    async def steps(
        request: Request,
        idempotency_key: Annotated[
            str | None, Header(min_length=1, max_length=MAX_IDEMPOTENCY_KEY, description=IDEMPOTENCY_HELP)
        ] = None,
    ) -> StepsResponse:
        """Record executed steps; a step is identified by (run_id, step), so a step posted again is skipped.
        Number a run's steps along the run, across its replans. With an `Idempotency-Key` header (or the body's
        `idempotency_key`) a retried batch is recorded once and answered as the first time; other steps under a
        used key are refused, 422 `IdempotencyKeyReused`."""
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
        return await service.record_steps(body, idempotency_key)

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
    if token is not None:
        _require_bearer(app)
    return Guard(app, service, token, max_body_bytes, large_body_budget, public_docs=public_docs)


DOCS_ASSETS = "/docs/assets"


def docs_routes(app: FastAPI) -> None:
    """GET /docs, Swagger UI, with its script, stylesheet and icon from DOCS_ASSETS: FastAPI's "self-hosting
    JavaScript and CSS for docs" recipe. The files are those fastapi-offline ships (Swagger UI 5: FastAPI's
    schema is OpenAPI 3.1, which Swagger UI 4, as in swagger-ui-bundle, refuses to render); only its files are
    used, the app stays a plain FastAPI."""
    from importlib.resources import files

    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    assets = files("fastapi_offline") / "static"
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(assets)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        )


def _require_bearer(app: FastAPI) -> None:
    """Say in the OpenAPI document that every operation but the open ones needs the bearer token: Swagger UI
    then offers "Authorize", so a browser reading the docs can try the operations with the token."""
    from portfolio.serve.guard import OPEN_PATHS

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        if "bearer" not in schemes:
            schemes["bearer"] = {"type": "http", "scheme": "bearer", "description": "the server's --token"}
            for path, operations in schema["paths"].items():
                for operation in operations.values() if path not in OPEN_PATHS else ():
                    operation["security"] = [{"bearer": []}]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


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
