"""Fail closed: a server starts only with a way to tell its callers apart (`check_credentials`), unless it is
told not to on an address only this machine reaches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from portfolio.serve.origins import is_loopback

if TYPE_CHECKING:
    from traces.store import TraceStore

ADD_KEY = "portfolio keys add NAME --tenant TENANT --scopes plan,steps:write,read --traces PATH"


class InsecureStart(ValueError):
    """A server that would answer without authentication, or could not authenticate anyone (exit 2)."""


def check_credentials(token: str | None, store: TraceStore | None, insecure: bool, host: str) -> None:
    """InsecureStart, saying what to do, unless the server has a non-empty `token` or keys in `store` (and no
    `insecure`), or has `insecure` and none of them on a loopback `host`."""
    from portfolio.serve.keys import count_keys

    if token is not None and not token:
        raise InsecureStart(
            "an empty token (--token '' or PORTFOLIO_TOKEN='') would let every request in: give a token, or "
            f"unset it and create API keys (`{ADD_KEY}`)"
        )
    keys = count_keys(store) if store is not None else 0
    if insecure:
        if not is_loopback(host):
            raise InsecureStart(
                f"--insecure answers every request without a key, so it is allowed on a loopback address only "
                f"(--host 127.0.0.1, ::1 or localhost), not {host}: create a key (`{ADD_KEY}`), start the "
                "server with --traces PATH, and drop --insecure"
            )
        if token or keys:
            raise InsecureStart(
                f"--insecure would ignore the server's {'token' if token else f'{keys} API keys'}: drop --insecure"
            )
        return
    if not token and not keys:
        where = "its trace store holds no API key" if store is not None else "it has no trace store (--traces)"
        raise InsecureStart(
            f"the server would have no way to tell its callers apart: {where} and no --token was given. Create "
            f"a key (`{ADD_KEY}`) and start with --traces PATH, or set PORTFOLIO_TOKEN; for local tests only, "
            "--insecure serves without keys on a loopback address"
        )
