"""The planner as MCP tools, with the official MCP Python SDK (`mcp.server.mcpserver.MCPServer`).

Tools: `plan`, `replan`, `validate`, `record_steps`, `action_stats`, `costs`, `retrain`. Each takes the fields of the
HTTP route's pydantic body as its arguments (`PlanArgs` for `plan`, ..., `_tool_taking`): one input
schema for both interfaces, an unknown argument refused as HTTP refuses an unknown field. Each declares an output
schema (from its pydantic return model), and answers with structured content plus the same JSON as text for
clients that only read text. They call the same `Service` as the HTTP routes, so a
tool call takes a worker from the same pool, obeys the same queue limit and writes the same trace store.

Transports: stdio (`portfolio mcp`, one planner worker by default; its one user is the admin of the default
tenant) and streamable HTTP, mounted at `/mcp` on the HTTP service behind the same API keys: each tool needs the
scope its HTTP twin needs (`TOOL_SCOPES`), runs are the caller's tenant's (`portfolio.serve.tenancy`), plans count
against the caller's plans at once and a retrain joins the one running, if any, as over HTTP (or fails with
`RetrainRunning` while another process sharing the store runs one). A failed call
(bad PDDL, unknown run, full queue, a missing scope) is a tool result with `isError` and the message. A stdio
line that is not a JSON-RPC message gets a JSON-RPC error (-32700 / -32600, with the request's id when it has
one) and a warning in the log; it does not end the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast, get_type_hints

from mcp import types
from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, Field

from portfolio.engine.wire_model import WireModel
from portfolio.serve.models import (
    ActionsResponse,
    BadRequest,
    CostsBody,
    CostsResponse,
    PlanArgs,
    PlanBody,
    PlanResponse,
    ReplanArgs,
    ReplanBody,
    RetrainBody,
    StepsBody,
    StepsResponse,
    ValidateBody,
    Verdict,
)
from portfolio.serve.service import Service

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

    from portfolio.serve.keys import Principal
    from portfolio.serve.quotas import Quotas

log = logging.getLogger(__name__)

# The scope each tool needs: its HTTP route's (`portfolio.serve.http`)
TOOL_SCOPES = {
    "plan": "plan",
    "replan": "plan",
    "validate": "plan",
    "record_steps": "steps:write",
    "action_stats": "read",
    "costs": "read",
    "retrain": "learn",
}

INSTRUCTIONS = (
    "A planner for agent runtimes. `plan` a task (PDDL domain+problem texts or a JSON task) to get a validated "
    "plan and a run_id; execute it, `record_steps` as they happen, `replan` from the observed state when a step "
    "fails. `validate` checks a plan you wrote yourself and says precisely which step fails and why. "
    "`action_stats` shows which actions fail how often."
)


def _anticipated() -> tuple[type[Exception], ...]:
    """Failures the caller can act on; their text reaches the client. Anything else is a crash, which the SDK
    reports without its text (and logs on the server)."""
    from pydantic import ValidationError

    from domains.errors import TaskInputError
    from portfolio.serve.auth import Forbidden, Unauthorized
    from portfolio.serve.pool import PlannerFailed, QueueFull
    from portfolio.serve.quotas import QuotaExceeded
    from portfolio.serve.service import NotFound, Unavailable
    from traces.errors import TraceStoreError

    return (
        BadRequest,
        TaskInputError,
        ValidationError,
        NotFound,
        Unavailable,
        QueueFull,
        PlannerFailed,
        TraceStoreError,
        Unauthorized,
        Forbidden,
        QuotaExceeded,
    )


class NoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetrainResponse(BaseModel):
    """What the `retrain` tool answers: the stored model's version and how it was fitted."""

    model_config = ConfigDict(extra="allow")

    version: int | None = Field(
        description="the new model's version, of your tenant's model; plans made from now on use it (null: your "
        "tenant has recorded no steps to learn from yet)"
    )


async def _now(fn: Callable[[], Any]) -> Any:
    """`fn()` as an awaitable, so that its exceptions pass through `guarded` like a service call's."""
    return fn()


def _tool_taking(fn: Callable[..., Any], model: type[BaseModel], description: str) -> Tool:
    """The tool `fn`, taking `model`'s fields as its arguments: its input schema is the model's JSON Schema (the
    HTTP body's, so the two interfaces cannot drift apart) and an argument the model does not know is refused,
    not dropped (`extra="forbid"`: a misspelled `exclueded` would otherwise plan as if nothing were excluded). The SDK
    reads a tool's `fn_metadata.arg_model` at each call and publishes `parameters` as its input schema.

    A tool that answers a `WireModel` dataclass (`PlanResponse`) has that class as its output model: validated,
    serialised and published as pydantic sees the class, field descriptions included (the SDK would otherwise
    build a model of its own from the class's type hints, without the descriptions)."""
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata

    tool = Tool.from_function(fn, description=description)
    name = tool.name
    arguments = cast(type[ArgModelBase], type(f"{name}_arguments", (model, ArgModelBase), {"__module__": __name__}))
    returns = get_type_hints(fn).get("return")
    if isinstance(returns, type) and issubclass(returns, WireModel):
        tool.fn_metadata = FuncMetadata(arg_model=arguments, output_model=returns)
    else:
        tool.fn_metadata.arg_model = arguments
    tool.parameters = arguments.model_json_schema(by_alias=True)
    return tool


def build_mcp(service: Service, quotas: Quotas | None = None, local: Principal | None = None):
    """The MCP server over `service`. Over HTTP each call acts for the principal the `Guard` found for its
    request; a call with no HTTP request (stdio) acts for `local`, and is refused without one. `quotas`: the
    HTTP service's, so plans and retrains count as they do over HTTP (None: no quotas, as on stdio)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from portfolio.serve import tenancy
    from portfolio.serve.auth import principal_in, require
    from portfolio.serve.service import NotFound

    anticipated = _anticipated()

    async def guarded(call):
        try:
            return await call
        except anticipated as error:  # an isError result naming the kind, as the HTTP error body does
            message = service.hide_paths(f"{getattr(error, 'kind', type(error).__name__)}: {error}")
            raise ToolError(message) from error

    def caller(ctx: Context, tool: str) -> Principal:
        try:
            request = ctx.request_context.request
        except ValueError:  # no request context at all
            request = None
        principal = principal_in(request.scope) if request is not None else local
        try:
            return require(principal, TOOL_SCOPES[tool])
        except anticipated as error:
            raise ToolError(f"{error.kind}: {error}") from error  # type: ignore[attr-defined]

    async def planning(principal: Principal, call):
        if quotas is None:
            return await guarded(call)
        try:
            quotas.acquire_plan(principal)
        except anticipated as error:
            call.close()
            raise ToolError(f"{getattr(error, 'kind', type(error).__name__)}: {error}") from error
        try:
            return await guarded(call)
        finally:
            quotas.release_plan(principal)

    async def plan(ctx: Context, **arguments: Any) -> PlanResponse:
        principal = caller(ctx, "plan")
        body = await guarded(_now(lambda: tenancy.plan_in(principal.tenant, PlanBody(**arguments))))
        return tenancy.plan_out(principal.tenant, await planning(principal, service.plan(body)))

    async def replan(ctx: Context, **arguments: Any) -> PlanResponse:
        principal = caller(ctx, "replan")
        client = ReplanBody(**arguments)
        body = await guarded(_now(lambda: tenancy.replan_in(principal.tenant, client)))
        try:
            answer = await planning(principal, service.replan(body))
        except ToolError as error:
            if isinstance(error.__cause__, NotFound):  # the message names the run as the client does
                raise ToolError(str(error).replace(repr(body.run_id), repr(client.run_id))) from None
            raise
        return tenancy.plan_out(principal.tenant, answer)

    async def validate(ctx: Context, **arguments: Any) -> Verdict:
        principal = caller(ctx, "validate")
        return await guarded(service.validate(ValidateBody(**arguments), caller=principal.name))

    async def record_steps(ctx: Context, **arguments: Any) -> StepsResponse:
        principal = caller(ctx, "record_steps")
        body = await guarded(_now(lambda: tenancy.steps_in(principal.tenant, StepsBody(**arguments))))
        answer = await guarded(service.record_steps(body, provenance=(principal.tenant, principal.name)))
        return tenancy.steps_out(principal.tenant, answer)

    async def action_stats(ctx: Context, **arguments: Any) -> ActionsResponse:
        principal = caller(ctx, "action_stats")
        return await guarded(service.actions(**tenancy.stats_filter(principal.tenant), tenant=principal.tenant))

    async def costs(ctx: Context, **arguments: Any) -> CostsResponse:
        principal = caller(ctx, "costs")
        return await guarded(service.costs(CostsBody(**arguments), principal.tenant))

    async def retrain(ctx: Context, **arguments: Any) -> RetrainResponse:
        principal = caller(ctx, "retrain")
        body = RetrainBody(**arguments)
        await guarded(_now(service.need_store))
        if body.include_held:
            await guarded(_now(lambda: require(principal, "admin")))
        if service.running_retrain() is None or body.include_held:
            await guarded(service.check_retrain_elsewhere())  # another server's, or `portfolio retrain`
        if quotas is not None and (service.running_retrain() is None or body.include_held):
            await guarded(_now(lambda: quotas.retrain(principal)))
        # the running retrain, if any: eight calls at once are one retrain, as over HTTP
        job = await guarded(_now(lambda: service.submit_retrain(body)))
        await service.finished(job)
        if job.status != "done" or job.result is None:
            raise ToolError(job.error or "the retrain failed")
        view = tenancy.retrain_out(principal.tenant, job.result, service.learning_tenant(principal.tenant))
        return RetrainResponse(**view)

    tools = [
        _tool_taking(fn, arguments, description)
        for fn, arguments, description in (
            (
                plan,
                PlanArgs,
                "Find a validated plan for a task; returns the PlanResult (as `portfolio plan --json`) "
                "and a run_id for replan and record_steps.",
            ),
            (
                replan,
                ReplanArgs,
                "Plan again for an earlier run from the state the runtime observed (every true atom). What is "
                "still valid of the plan being executed comes back as plan-reuse, never a step that ran: the "
                "run's plan less the steps recorded with record_steps (record them first), or your own "
                "previous_plan and executed steps.",
            ),
            (
                validate,
                ValidateBody,
                "Check a plan against a task with the validator: valid or not, the failing step "
                "(1-based), the kind of problem and the literals that did not hold.",
            ),
            (
                record_steps,
                StepsBody,
                "Record executed plan steps in the trace store (learned costs come from them; replan skips the "
                "steps that ran). With an idempotency_key a retried batch is recorded once and answered the same.",
            ),
            (
                action_stats,
                NoArguments,
                "Per action name: steps run, failures, failure rate, mean duration and the "
                "current predicted failure probability.",
            ),
            (
                costs,
                CostsBody,
                "The learned cost of every grounded action of a task (base cost, p_fail, the cost "
                "plans pay), riskiest first; empty until a model is trained.",
            ),
            (
                retrain,
                RetrainBody,
                "Fit each tenant's failure model on its recorded steps (as `portfolio retrain`); later plans "
                "use its learned costs. Returns your tenant's new model's version and fit, with the batches the "
                "poison guard held back (one principal's steps departing sharply from what the model knew).",
            ),
        )
    ]
    return MCPServer("portfolio-planner", version="0.1.0", instructions=INSTRUCTIONS, tools=tools)


async def serve_stdio(service: Service) -> None:
    """`portfolio mcp`: start the workers, serve MCP on stdin/stdout until the client closes it, stop them."""
    import asyncio

    from portfolio.serve.keys import LOCAL

    mcp = build_mcp(service, local=LOCAL)
    service.start()
    watcher = asyncio.get_running_loop().create_task(service.watch())
    try:
        await _run_stdio(mcp)
    finally:
        watcher.cancel()
        service.close()


async def _run_stdio(mcp: MCPServer) -> None:
    """`MCPServer.run_stdio_async`, with a line that is not a JSON-RPC message answered as JSON-RPC 2.0 asks
    (-32700 parse error, -32600 invalid request; the request's id when it has one) and logged: the SDK (2.3.0)
    only logs it at debug level and never answers, so a client waits for a reply that never comes."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    server = getattr(mcp, "_lowlevel_server", None)  # what run_stdio_async runs; 2.3.0 has no public accessor
    if server is None:  # a later SDK renamed it: serve as the SDK does, without the answers to malformed lines
        log.warning("MCP: this SDK version hides its low-level server; malformed lines will go unanswered")
        await mcp.run_stdio_async()
        return
    async with stdio_server() as (read_stream, write_stream):
        inbound, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def screen() -> None:
            async with inbound:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        log.warning("MCP: ignored a malformed message: %s", str(item).splitlines()[0])
                        await write_stream.send(SessionMessage(malformed_answer(item)))
                    else:
                        await inbound.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(screen)
            await server.run(received, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()


def malformed_answer(error: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the SDK could not read as a message."""
    from pydantic import ValidationError

    not_json = isinstance(error, ValidationError) and any(e["type"] == "json_invalid" for e in error.errors())
    request_id = None
    if isinstance(error, ValidationError):
        for detail in error.errors():
            value = detail.get("input")
            if isinstance(value, dict) and isinstance(value.get("id"), (int, str)):
                request_id = value["id"]
                break
    code, what = (
        (types.PARSE_ERROR, "Parse error: not JSON")
        if not_json
        else (types.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message of the MCP schema")
    )
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=what))


__all__ = ["BadRequest", "build_mcp", "serve_stdio"]
