"""How the service answers errors: JSON `{"error", "kind"}` with the status each kind of failure means
(`install_error_handlers`), never a traceback, and never the server's own paths: every message goes through the
service's `hide` (`Service.hide_paths`: the trace store's location), and a store or worker failure is logged whole
on the server."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from domains.errors import TaskInputError
from portfolio.serve.auth import Forbidden, Unauthorized
from portfolio.serve.disconnect import ClientGone
from portfolio.serve.models import BadRequest
from portfolio.serve.pool import PlannerFailed, QueueFull
from portfolio.serve.quotas import QuotaExceeded
from portfolio.serve.service import NotFound, Unavailable

log = logging.getLogger(__name__)


def json_error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "kind": kind}, status_code=status, headers=headers)


_json_error = json_error


def _pydantic_message(error: ValidationError | RequestValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"] if p != "body") or "body"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def _unchanged(text: str) -> str:
    return text


def install_error_handlers(app: FastAPI, hide: Callable[[str], str] = _unchanged) -> None:
    """Answer every error as JSON; `hide` rewrites each message before a client reads it."""
    from portfolio.serve.store_health import StoreUnreachableError
    from traces.errors import BadRowError, DatabaseLockedError, StoreUnavailableError, TraceStoreError

    def json_error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return _json_error(status, hide(message), kind, headers)

    @app.exception_handler(RequestValidationError)
    async def schema_error(request: Request, error: RequestValidationError) -> JSONResponse:
        invalid = [item for item in error.errors() if item.get("type") == "json_invalid"]
        if invalid:
            where, why = invalid[0]["loc"][-1], invalid[0].get("ctx", {}).get("error", "invalid JSON")
            return json_error(400, f"body is not JSON: {why} at character {where}", "BadRequest")
        return json_error(400, _pydantic_message(error), "SchemaError")

    @app.exception_handler(ValidationError)
    async def model_error(request: Request, error: ValidationError) -> JSONResponse:
        return json_error(400, _pydantic_message(error), "SchemaError")

    @app.exception_handler(BadRequest)
    @app.exception_handler(TaskInputError)
    async def bad_input(request: Request, error: Exception) -> JSONResponse:
        return json_error(getattr(error, "status", 400), str(error), getattr(error, "kind", type(error).__name__))

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, error: ClientGone) -> JSONResponse:
        return json_error(499, str(error), "ClientGone")  # sent nowhere: the connection is closed

    @app.exception_handler(NotFound)
    async def not_found(request: Request, error: NotFound) -> JSONResponse:
        return json_error(404, str(error), "NotFound")

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, error: Unauthorized) -> JSONResponse:
        return json_error(401, str(error), error.kind, {"WWW-Authenticate": "Bearer"})

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, error: Forbidden) -> JSONResponse:
        return json_error(403, str(error), error.kind)

    @app.exception_handler(QuotaExceeded)
    async def over_quota(request: Request, error: QuotaExceeded) -> JSONResponse:
        return json_error(429, str(error), error.kind, {"Retry-After": str(error.retry_after)})

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, error: QueueFull) -> JSONResponse:
        return json_error(503, str(error), "QueueFull", {"Retry-After": "1"})

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, error: Unavailable) -> JSONResponse:
        return json_error(503, str(error), error.kind)

    @app.exception_handler(PlannerFailed)
    async def planner_failed(request: Request, error: PlannerFailed) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, error)
        return json_error(500, str(error), "PlannerFailed")

    @app.exception_handler(TraceStoreError)
    async def store_error(request: Request, error: TraceStoreError) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, error)  # whole, with the path
        if isinstance(error, (DatabaseLockedError, StoreUnreachableError, StoreUnavailableError)):
            # the store may be back in a second: a writer done, a file back, a PostgreSQL server restarted
            return json_error(503, str(error), type(error).__name__, {"Retry-After": "1"})
        if isinstance(error, BadRowError):  # a stored row (a model): not the request's fault; an operator must act
            return json_error(503, str(error), type(error).__name__)
        return json_error(500, str(error), type(error).__name__)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(error.status_code, "HTTPError")
        message = (
            f"no route {request.method} {request.url.path}" if error.status_code in (404, 405) else str(error.detail)
        )
        # Starlette's own headers go with the answer: `Allow` on a 405 (RFC 9110 requires it), and whatever a
        # route's HTTPException names
        return json_error(error.status_code, message, kind, getattr(error, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        log.error("unhandled error on %s", request.url.path, exc_info=error)
        return json_error(500, f"internal error: {type(error).__name__}: {error}", "InternalError")
