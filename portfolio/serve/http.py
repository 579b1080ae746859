"""The HTTP service: FastAPI over a `Service` (pool of warm planner workers), served by uvicorn.

    POST /v1/plan      PlanBody -> 200 PlanResponse (the CLI's --json PlanResult + run_id); "wait": false -> 202 Job
    POST /v1/replan    run_id + observed state -> 200 PlanResponse (or 202 Job); never a step that ran
    POST /v1/validate  task + plan -> 200 Verdict (the validator's verdict and critique)
    POST /v1/steps     {"steps": [StepRecord...]} -> 200 {"recorded": n, "skipped": n, "conflicts": [...]};
                       Idempotency-Key: a retried batch answered as the first time
    GET  /v1/actions   per-action stats and current p_fail
    POST /v1/retrain   -> 202 Job (fit the next failure and selection models on a worker);  GET /v1/jobs/{id} -> Job
    GET  /v1/health    (no key needed);  GET /metrics (Prometheus);  /openapi.json, /docs;  /mcp (MCP)

Every route but /v1/health needs an API key (`portfolio.serve.keys`; or the server's --token) holding the scope
the route declares with `Security(authorize, scopes=[...])`, which the OpenAPI document lists per operation:
`plan` (plan, replan, validate), `steps:write`, `learn` (retrain), `read` (costs, actions, jobs), `metrics`;
`admin` holds them all. Runs and jobs belong to the key's tenant: a client's run ids are namespaced where they
come in and go out (`portfolio.serve.tenancy`), and another tenant's run or job is a 404, as if it did not exist.

/docs is Swagger UI with its JavaScript and CSS served from /docs/assets/ (`docs_routes`, FastAPI's documented
self-hosting recipe, the files of the fastapi-offline package), so it renders with no network beyond the
service. `public_docs` lets GET /docs, /docs/assets/... and /openapi.json through without a key.

Errors are JSON `{"error", "kind"}` whatever happens: 400 bad input (`kind` names the error type: PDDLSyntaxError,
SchemaError, ...), 401 without a valid key, 403 a key without the route's scope or a foreign Origin, 404, 409 a retrain
while another server sharing the trace store (or `portfolio retrain`) runs one (`RetrainRunning`), 413 body
too large (over --max-body, or more than the server's memory holds: `portfolio.serve.body_budget`), 415 a body
that is not `application/json`, 421 a Host the server does not answer for, 422 a
validation too costly to finish (`ValidationTooCostly`: over --validate-budget or the memory cap), 429 +
Retry-After over the key's quota, 500 a planner worker died or hung (it was replaced; the reason says why), 503 +
Retry-After when the queue is full, the trace store is locked or too many large bodies are in flight
(`BusyWithLargeBodies`), 503 without it when the stored model cannot be read (`ModelFormatError`: retrain). A
handler that raises anything else is answered 500 too, never with a dropped connection. The OpenAPI document
lists, for each operation, every one of these it can answer, with the `ErrorBody` schema
(`portfolio.serve.openapi_errors`).

Errors are answered by `portfolio.serve.errors`; admission is `portfolio.serve.guard.Guard`, plain ASGI
middleware around the whole app, the MCP endpoint included: Host and Origin, the key (read from the header
before the body), the content type, the quotas and the body size (from Content-Length and again while the body
is read in), and a JSON body screened for nesting depth, 64-bit integers, finite numbers and Unicode text
(`portfolio.serve.screen`) before the app sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any

from fastapi import FastAPI, Header, Request, Security
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from portfolio.serve import tenancy
from portfolio.serve.auth import Authenticator, authorize, require
from portfolio.serve.connections import quiet_accept_errors
from portfolio.serve.disconnect import until_disconnected
from portfolio.serve.errors import install_error_handlers
from portfolio.serve.guard import MAX_BODY_BYTES, Guard
from portfolio.serve.keys import KeyRing, Principal
from portfolio.serve.models import (
    IDEMPOTENCY_HELP,
    MAX_IDEMPOTENCY_KEY,
    ActionsResponse,
    BadRequest,
    CostsBody,
    CostsResponse,
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
from portfolio.serve.openapi_errors import errors, without_unused_422
from portfolio.serve.origins import AllowList
from portfolio.serve.quotas import QuotaDefaults, Quotas
from portfolio.serve.service import NotFound, Service
from portfolio.serve.startup import check_credentials

log = logging.getLogger(__name__)

# A route's caller, holding the scope named (`authorize`); the OpenAPI document lists the scope per operation
Planner = Annotated[Principal, Security(authorize, scopes=["plan"])]
StepWriter = Annotated[Principal, Security(authorize, scopes=["steps:write"])]
Learner = Annotated[Principal, Security(authorize, scopes=["learn"])]
Reader = Annotated[Principal, Security(authorize, scopes=["read"])]
MetricsReader = Annotated[Principal, Security(authorize, scopes=["metrics"])]


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
    *,
    insecure: bool = False,
    allowed_hosts: Iterable[str] = (),
    quotas: QuotaDefaults | None = None,
):
    """The ASGI app: FastAPI routes plus the MCP endpoint, inside the `Guard` middleware. Starting it (the
    lifespan) starts the planner workers; stopping it stops them.

    Callers are the API keys of the service's trace store (`portfolio.serve.keys`) and, with `token`, one admin
    of the default tenant; `insecure` (a loopback `host` only) lets every request in as that admin instead.
    Neither: `InsecureStart` (`portfolio.serve.startup.check_credentials`). `allowed_hosts`: names beside
    `host` and the loopback ones that the Host and Origin headers may carry (`AllowList`). `quotas`: per
    principal, for keys that set none. `public_docs`: the docs and the schema are read without a key; every
    operation still needs one."""
    from portfolio.serve.mcp_server import build_mcp

    check_credentials(token, service.store, insecure, host)
    keyring = KeyRing(service.store) if service.store is not None and not insecure else None
    authenticator = Authenticator(token, keyring, insecure=insecure)
    allowed = AllowList(host, allowed_hosts)
    limits = Quotas(quotas, max_body_bytes)
    owners = tenancy.JobOwners()

    mcp = build_mcp(service, quotas=limits)
    mcp_routes = mcp.streamable_http_app(
        streamable_http_path="/mcp", host=host, transport_security=allowed.transport_security()
    ).routes

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        quiet_accept_errors(asyncio.get_running_loop())  # the server's loop: a count per interval, no tracebacks
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
        description="Validated plans from a pool of warm planners; learned action costs from traces. Every "
        "operation but /v1/health needs an API key (`Authorization: Bearer KEY`) holding the scope it lists.",
        docs_url=None,  # served by `docs_routes`, from local files instead of a CDN
        redoc_url=None,
    )
    install_error_handlers(app, service.hide_paths)
    docs_routes(app)

    def submit_plan(kind, principal: Principal, work: Callable[[], Awaitable[PlanResponse]]) -> JSONResponse:
        """A plan or replan job, holding one of the principal's plan slots until it ends."""

        async def held() -> PlanResponse:
            try:
                return await work()
            finally:
                limits.release_plan(principal)

        limits.acquire_plan(principal)
        try:
            job = service.submit(kind, held)
        except BaseException:
            limits.release_plan(principal)
            raise
        owners.add(job.id, principal.tenant)
        return _job_response(job)

    async def replanned(principal: Principal, body: ReplanBody, client_run_id: str):
        """`service.replan(body)`, a NotFound naming the run as the client does."""
        try:
            return await service.replan(body)
        except NotFound as error:
            raise NotFound(str(error).replace(repr(body.run_id), repr(client_run_id))) from None

    @app.post("/v1/plan", response_model=PlanResponse, responses={202: {"model": Job}, **errors(body=True)})
    async def plan(body: PlanBody, principal: Planner):
        """Plan a task (scope `plan`). The run id, given or made, names the run in the caller's tenant."""
        stored = tenancy.plan_in(principal.tenant, body)
        if not body.wait:
            return submit_plan("plan", principal, lambda: service.plan(stored))
        with limits.plan_slot(principal):
            return tenancy.plan_out(principal.tenant, await service.plan(stored))

    @app.post("/v1/replan", response_model=PlanResponse, responses={202: {"model": Job}, **errors(404, body=True)})
    async def replan(body: ReplanBody, principal: Planner):
        """Plan the run's task again from the observed `state` (scope `plan`); another tenant's run, or none, is a
        404. What is still valid of the plan being executed is returned as `plan-reuse`, but never a step that
        ran: by default that plan is the one this service last handed out for the run, less the steps recorded
        for the run since (POST /v1/steps: record them before replanning); a runtime that keeps its own state
        sends `previous_plan` and `executed` instead."""
        stored = tenancy.replan_in(principal.tenant, body)
        if not body.wait:
            try:
                await service.run_source(stored.run_id)  # an unknown run is a 404 now, not a failed job later
            except NotFound as error:
                raise NotFound(str(error).replace(repr(stored.run_id), repr(body.run_id))) from None
            return submit_plan("replan", principal, lambda: replanned(principal, stored, body.run_id))
        with limits.plan_slot(principal):
            return tenancy.plan_out(principal.tenant, await replanned(principal, stored, body.run_id))

    @app.post("/v1/costs", response_model=CostsResponse, responses=errors(body=True))
    async def costs(body: CostsBody, principal: Reader) -> CostsResponse:
        """The learned cost of every grounded action of the task (as `portfolio costs`): base cost, p_fail and
        the cost plans pay, riskiest first (scope `read`). The model is learned from the caller's tenant's steps
        (every tenant's on a server started with --pool-learning)."""
        return await service.costs(body, principal.tenant)

    @app.post("/v1/validate", response_model=Verdict, responses=errors(422, body=True))
    async def validate(body: ValidateBody, principal: Planner, request: Request) -> Verdict:
        """Check a plan against a task (scope `plan`). A check whose worst case cannot finish within the
        server's --validate-budget or memory cap is refused at once, 422 `ValidationTooCostly` saying what, how
        large and the limit. Each key's validations queue on their own and keys take turns, and a client that
        hangs up stops its check."""
        return await until_disconnected(request, service.validate(body, caller=principal.name))

    # The body is validated on a thread in batches (`steps_body`), not by FastAPI on the event loop: a 30 MB
    # batch held the loop for seconds. The schema is still published (`_publish`).
    @app.post(
        "/v1/steps",
        response_model=StepsResponse,
        responses=errors(422, body=True),  # 400 also without a trace store
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/StepsBody"}}},
            }
        },
    )
    async def steps(
        request: Request,
        principal: StepWriter,
        idempotency_key: Annotated[
            str | None, Header(min_length=1, max_length=MAX_IDEMPOTENCY_KEY, description=IDEMPOTENCY_HELP)
        ] = None,
    ) -> StepsResponse:
        """Record executed steps in runs of the caller's tenant (scope `steps:write`); a step is identified by
        (run_id, step), so a step posted again is skipped. Number a run's steps along the run, across its
        replans. With an `Idempotency-Key` header (or the body's `idempotency_key`) a retried batch is recorded
        once and answered as the first time; other steps under a used key are refused, 422
        `IdempotencyKeyReused`."""
        import anyio

        from portfolio.serve.screen import NOT_JSON

        # taken out of the scope, so that the batch is let go of as it is read (`steps_body`)
        document = request.scope.get("state", {}).pop("screened_json", NOT_JSON)
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
        body = tenancy.steps_in(principal.tenant, body, idempotency_key)
        answer = await service.record_steps(body, provenance=(principal.tenant, principal.name))
        return tenancy.steps_out(principal.tenant, answer)

    @app.get("/v1/actions", response_model=ActionsResponse, responses=errors(400))  # 400: no trace store
    async def actions(principal: Reader) -> ActionsResponse:
        """Per action name, the statistics of the caller's tenant's steps, and p_fail under its tenant's latest
        model (scope `read`)."""
        return await service.actions(**tenancy.stats_filter(principal.tenant), tenant=principal.tenant)

    @app.post("/v1/retrain", status_code=202, response_model=Job, responses=errors(409, body=True))
    async def retrain(principal: Learner, body: RetrainBody | None = None):
        """Fit the next failure model of every tenant and the selection model (scope `learn`); while one retrain
        runs, every call answers its job, whose result is the caller's tenant's model (with the batches the
        poison guard held back); while another process sharing the trace store runs one (a server, `portfolio
        retrain`), a 409 `RetrainRunning`. Starting one counts against the caller's retrains per minute.
        `include_held` (scope `admin`) fits the held batches too."""
        service.need_store()
        body = body or RetrainBody()
        if body.include_held:
            require(principal, "admin")
        if service.running_retrain() is None or body.include_held:
            await service.check_retrain_elsewhere()
            limits.retrain(principal)
        job = service.submit_retrain(body)
        owners.add(job.id, principal.tenant)
        return _job_response(job)

    @app.get("/v1/jobs/{job_id}", response_model=Job, responses=errors(404))
    async def job(job_id: str, principal: Reader) -> Job:
        """A job the caller's tenant started (scope `read`); another tenant's is a 404."""
        found = service.job(job_id)
        if not owners.owns(job_id, principal.tenant):
            raise NotFound(f"unknown job {job_id!r}")
        if found.kind in ("plan", "replan") and found.result is not None:
            return found.model_copy(update={"result": tenancy.plan_out(principal.tenant, found.result)})
        if found.kind == "retrain" and found.result is not None:
            view = tenancy.retrain_out(principal.tenant, found.result, service.learning_tenant(principal.tenant))
            return found.model_copy(update={"result": view})
        return found

    @app.get("/v1/health", response_model=HealthResponse, responses=errors(keyed=False))
    async def health() -> HealthResponse:
        return service.health()

    @app.get("/metrics", response_class=Response, responses=errors())
    async def metrics(principal: MetricsReader) -> Response:
        """Prometheus metrics (scope `metrics`)."""
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app.router.routes.extend(mcp_routes)
    _publish(app, StepsBody)
    return Guard(
        app, service, authenticator, allowed, limits, max_body_bytes, large_body_budget, public_docs=public_docs
    )


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


def _publish(app: FastAPI, *models: type[BaseModel]) -> None:
    """Add `models`' JSON Schemas to the OpenAPI components (for routes that take the raw request), and take out
    the 422s this service never answers (`without_unused_422`)."""
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
            app.openapi_schema = without_unused_422(schema)
        return app.openapi_schema

    # FastAPI's documented way to extend the schema is to replace `app.openapi`; the alternative is a subclass
    app.openapi = openapi  # type: ignore[method-assign]
