"""Who a request acts for, and whether it may: `Authenticator` turns the `Authorization: Bearer ...` header into
a `Principal` (an API key of the trace store, the server's --token, or everyone with --insecure); `authorize` is
the FastAPI security dependency each route declares with the scopes it needs (`Security(authorize,
scopes=["plan"])`), which also puts those scopes in the OpenAPI document; `require` is the same check for an MCP
tool.

The header is read by the `Guard` before anything else of the request, so a request without a valid key is
refused (401) before its body is read; `authorize` then reads the principal the Guard found and answers 403
when it lacks a scope.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes

from portfolio.serve.keys import ANONYMOUS, KEY_PREFIX, TOKEN_PRINCIPAL, KeyRing, Principal


class Unauthorized(Exception):
    """No valid key: answered 401."""

    kind = "Unauthorized"


class Forbidden(Exception):
    """A valid key without the scope an operation needs: answered 403."""

    kind = "Forbidden"


class Authenticator:
    """The principal of an `Authorization` header value: the `token` (admin of the default tenant), a key
    `keyring` holds, or with `insecure`, whatever the header, the anonymous admin of the default tenant."""

    def __init__(self, token: str | None = None, keyring: KeyRing | None = None, insecure: bool = False) -> None:
        import anyio

        self.token = token.encode() if token else None
        self.keyring = keyring
        self.insecure = insecure
        self._lookups = anyio.CapacityLimiter(2)  # store reads for keys not in the cache, off the event loop

    async def principal(self, header: bytes | None) -> Principal | None:
        """`Bearer KEY`, the scheme in any case (RFC 7235: auth schemes are case-insensitive); the token
        compared in constant time, a key by its hash (`KeyRing`). None: no principal (401)."""
        import anyio

        if self.insecure:
            return ANONYMOUS
        scheme, _, credentials = (header or b"").partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        secret = credentials.strip(b" ")
        if self.token is not None and secrets.compare_digest(secret, self.token):
            return TOKEN_PRINCIPAL
        if self.keyring is None or not secret.startswith(KEY_PREFIX.encode()) or not secret.isascii():
            return None
        key = secret.decode()
        hit, found = self.keyring.cached(key)
        if hit:
            return found
        return await anyio.to_thread.run_sync(self.keyring.principal, key, limiter=self._lookups)


BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="An API key (`portfolio keys add NAME --tenant T --scopes ...`) or the server's --token. Each "
    "operation lists the scope it needs; `admin` holds them all.",
)


def require(principal: Principal | None, scope: str) -> Principal:
    """`principal`, if it holds `scope`; Unauthorized without one, Forbidden without the scope."""
    if principal is None:
        raise Unauthorized("missing or wrong API key (Authorization: Bearer KEY)")
    if not principal.allows(scope):
        raise Forbidden(
            f"key {principal.name!r} lacks the scope {scope!r} this operation needs (it has: "
            f"{', '.join(sorted(principal.scopes))}); `portfolio keys add` a key with it"
        )
    return principal


def principal_in(scope: Mapping[str, Any]) -> Principal | None:
    """The principal the `Guard` found for an ASGI request (None on an open path)."""
    return scope.get("state", {}).get("principal")


def authorize(
    security: SecurityScopes,
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Principal:
    """The request's principal, holding every scope the route declares: `Security(authorize, scopes=[...])`.
    (`_credentials` is read by the Guard already; declaring it here names the bearer scheme in the schema.)"""
    principal = principal_in(request.scope)
    for scope in security.scopes:
        require(principal, scope)
    if principal is None:
        raise Unauthorized("missing or wrong API key (Authorization: Bearer KEY)")
    return principal
