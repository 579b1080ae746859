"""The service's outermost ASGI middleware (`Guard`): counts every request by route and status, checks the
bearer token and the body size, and screens a JSON body (`portfolio.serve.screen`) before the app sees it."""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from portfolio.serve.metrics import route_label
from portfolio.serve.service import Service

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
LARGE_BODY_BYTES = 1024 * 1024  # bodies from this size on count against the Guard's budget for large bodies
OPEN_PATHS = frozenset({"/v1/health"})
# With `public_docs`, read without the token too: the browser docs, their assets and the schema they render.
DOCS_PATHS = frozenset({"/docs", "/openapi.json"})
DOCS_PREFIX = "/docs/assets/"


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
        self,
        app,
        service: Service,
        token: str | None,
        max_body_bytes: int,
        large_body_budget: int | None = None,
        public_docs: bool = False,
    ) -> None:
        import anyio

        self.app, self.service, self.max_body_bytes = app, service, max_body_bytes
        self.token = token.encode() if token else None
        self.public_docs = public_docs
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

    def _open(self, scope) -> bool:
        """Whether `scope` is answered without the token: /v1/health always; with `public_docs`, reading
        (GET, HEAD) the docs, their assets and the schema."""
        path = scope["path"]
        if path in OPEN_PATHS:
            return True
        return (
            self.public_docs
            and scope["method"] in ("GET", "HEAD")
            and (path in DOCS_PATHS or path.startswith(DOCS_PREFIX))
        )

    def _authorized(self, header: bytes) -> bool:
        """`Bearer TOKEN`, the scheme in any case (RFC 7235: auth schemes are case-insensitive); the token
        compared in constant time."""
        scheme, _, credentials = header.partition(b" ")
        return scheme.lower() == b"bearer" and secrets.compare_digest(credentials.strip(b" "), self.token or b"")

    async def _guarded(self, scope, receive, send) -> None:
        headers = dict(scope["headers"])
        if self.token is not None and not self._open(scope):
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
