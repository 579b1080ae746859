"""The service's outermost ASGI middleware (`Guard`): counts every request by route and status, checks the Host
and Origin headers, the API key, the content type, the caller's quotas and the body size, and screens a JSON
body (`portfolio.serve.screen`) before the app sees it."""

from __future__ import annotations

import json
import logging
from typing import Any

from portfolio.serve.auth import Authenticator
from portfolio.serve.body_budget import BodyBudget
from portfolio.serve.metrics import route_label
from portfolio.serve.origins import AllowList
from portfolio.serve.quotas import QuotaExceeded, Quotas
from portfolio.serve.service import Service

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
LARGE_BODY_BYTES = 1024 * 1024  # bodies from this size on count against the Guard's budget for large bodies
OPEN_PATHS = frozenset({"/v1/health"})
# With `public_docs`, read without a key too: the browser docs, their assets and the schema they render.
DOCS_PATHS = frozenset({"/docs", "/openapi.json"})
DOCS_PREFIX = "/docs/assets/"
BODY_METHODS = ("POST", "PUT", "PATCH")


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


def _is_json(content_type: bytes) -> bool:
    return content_type.split(b";")[0].strip().lower() == b"application/json"


class Guard:
    """Outermost ASGI middleware: counts every request by route and status and admits it, in this order:

    1. Host among the allowed names (`AllowList`), else 421; an Origin, when sent, too, else 403;
    2. a valid API key (`Authenticator`; not on /v1/health, nor with `public_docs` on the docs), else 401,
       read from the header before a byte of the body;
    3. a Content-Length within `max_body_bytes`, else 413;
    4. a body, if any, sent as `application/json`, else 415 (a web page's form or `text/plain` post is no API
       call, and would need no CORS preflight);
    5. the principal within its quotas (`Quotas`: requests and body bytes per second), else 429 + Retry-After;
    6. a large body (from `LARGE_BODY_BYTES`) within the server memory kept for bodies (`BodyBudget`: what its
       route costs per body byte, as measured), else 413 when it would not fit alone, 503 + Retry-After when
       not beside those in flight;

    then reads the body (the size checked again as it streams in), screens it and hands the app the request
    with the principal in `scope["state"]["principal"]`, where the routes' `authorize` checks its scopes. One
    class so that every refusal is counted like any other answer.

    It also keeps the connection: uvicorn closes a keep-alive connection whenever the app raises, even after
    the answer was sent (Starlette re-raises past its 500 handler), so a client retrying a /v1/steps batch
    after a 500 could not tell whether it had landed. An exception stops here: answered 500 if nothing was
    sent yet, logged either way, never raised to the server."""

    def __init__(
        self,
        app,
        service: Service,
        authenticator: Authenticator,
        allowed: AllowList,
        quotas: Quotas,
        max_body_bytes: int,
        large_body_budget: int | None = None,
        public_docs: bool = False,
    ) -> None:
        import anyio

        self.app, self.service, self.max_body_bytes = app, service, max_body_bytes
        self.authenticator, self.allowed, self.quotas = authenticator, allowed, quotas
        self.public_docs = public_docs
        self._screening = anyio.CapacityLimiter(2)  # large bodies walked on threads, two at a time
        # The server memory large bodies in flight may take (`BodyBudget`: each charged what its route costs
        # per body byte, as measured); beyond it a large body is refused before it is read, 413 when it would
        # not fit alone, else 503 + Retry-After. Small ones never are.
        self.bodies = BodyBudget(service.config.memory_limit_mb, large_body_budget)

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

    def _open(self, scope) -> bool:
        """Whether `scope` is answered without a key: /v1/health always; with `public_docs`, reading
        (GET, HEAD) the docs, their assets and the schema."""
        path = scope["path"]
        if path in OPEN_PATHS:
            return True
        return (
            self.public_docs
            and scope["method"] in ("GET", "HEAD")
            and (path in DOCS_PATHS or path.startswith(DOCS_PREFIX))
        )

    async def _guarded(self, scope, receive, send) -> None:
        headers = dict(scope["headers"])
        if not self.allowed.host_ok(headers.get(b"host")):
            await _send_json(
                send,
                421,
                {
                    "error": "this server does not answer for that Host: add its name with `portfolio serve "
                    "--allowed-host NAME`",
                    "kind": "MisdirectedRequest",
                },
            )
            return
        if not self.allowed.origin_ok(headers.get(b"origin")):
            await _send_json(
                send, 403, {"error": "cross-origin requests from that Origin are refused", "kind": "ForbiddenOrigin"}
            )
            return
        principal = None
        if not self._open(scope):
            from traces.errors import TraceStoreError

            try:
                principal = await self.authenticator.principal(headers.get(b"authorization"))
            except (
                TraceStoreError
            ) as error:  # the keys could not be read (a store locked for long): not the caller's fault
                log.warning("could not read the API keys: %s", error)
                await _send_json(
                    send,
                    503,
                    {
                        "error": "the server cannot read its API keys just now; retry shortly",
                        "kind": type(error).__name__,
                    },
                    [(b"retry-after", b"1")],
                )
                return
            if principal is None:
                await _send_json(
                    send,
                    401,
                    {"error": "missing or wrong API key (Authorization: Bearer KEY)", "kind": "Unauthorized"},
                    [(b"www-authenticate", b"Bearer")],
                )
                return
        length = headers.get(b"content-length")
        declared = int(length) if length is not None and length.isdigit() else None
        if declared is not None and declared > self.max_body_bytes:
            await _send_json(
                send, 413, {"error": f"request body over {self.max_body_bytes} bytes", "kind": "BodyTooLarge"}
            )
            return
        has_body = declared != 0 if declared is not None else b"transfer-encoding" in headers
        if scope["method"] in BODY_METHODS and has_body and not _is_json(headers.get(b"content-type", b"")):
            await _send_json(
                send,
                415,
                {
                    "error": "request bodies are JSON: send Content-Type: application/json (curl: --json, or "
                    "-H 'Content-Type: application/json')",
                    "kind": "UnsupportedMediaType",
                },
            )
            return
        if principal is not None:
            try:
                self.quotas.admit(principal, declared or 0)
            except QuotaExceeded as error:
                await _send_json(
                    send,
                    429,
                    {"error": str(error), "kind": error.kind},
                    [(b"retry-after", str(error.retry_after).encode())],
                )
                return
            scope = dict(scope, state={**scope.get("state", {}), "principal": principal})
        if scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        # a chunked body has no length to go by: it counts as the largest that may come (and is cut there)
        path = scope["path"]
        most = min(self.max_body_bytes, self.bodies.largest(path))
        size = declared if declared is not None else most
        if size < LARGE_BODY_BYTES:
            await self._screened(scope, receive, send, most)
            return
        refused = self.bodies.take(path, size)
        if refused is not None:
            retry = [(b"retry-after", b"1")] if refused.status == 503 else []
            await _send_json(send, refused.status, {"error": refused.message, "kind": refused.kind}, retry)
            return
        try:
            await self._screened(scope, receive, send, most)
        finally:
            self.bodies.give_back(path, size)

    async def _screened(self, scope, receive, send, most: int) -> None:
        """Read the body in (up to `most` bytes: a chunked one has no Content-Length to check first), screen
        it, and hand it to the app."""
        import anyio

        from portfolio.serve.screen import NOT_JSON, BodyRejected, screen

        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > most:
                await _send_json(send, 413, {"error": f"request body over {most} bytes", "kind": "BodyTooLarge"})
                return
            if not message.get("more_body"):
                break
        data = bytes(body)
        del body  # one copy of a large body, not two
        principal = scope.get("state", {}).get("principal")
        if principal is not None and b"content-length" not in dict(scope["headers"]):
            self.quotas.charge_body(principal, len(data))  # streamed without a length: counted once read
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
        del document  # the route takes it out of the scope and lets go of it as it reads it
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": data, "more_body": False}

        await self.app(scope, replay, send)
