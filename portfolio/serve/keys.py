"""API keys: one per agent, each naming a principal (the key's NAME), a tenant and the scopes it may use.

    key = add_key(store, "agent-a", tenant="acme", scopes=["plan", "steps:write"])  # shown once, never stored
    list_keys(store)          # names, tenants, scopes, created, last used: never a key or its hash
    revoke_key(store, "agent-a")

A key is `ppk_` and 32 random bytes (URL-safe base64). The store keeps its SHA-256 only (`traces.keys`): a random
256-bit key needs no salt or slow hash, since there is no dictionary to try, and a leaked store gives no key.
The server finds a key by its hash (`KeyRing`), compares the hashes in constant time, and caches what it found
for at most `KeyRing.ttl_s` (1 s), so a revoked key stops working within a second, with no restart.

Scopes (`SCOPES`): `plan` (plan, replan, validate), `steps:write` (record steps), `learn` (retrain), `read`
(learned costs, action statistics, jobs), `metrics` (/metrics) and `admin`, which holds every other scope.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from traces.tenants import DEFAULT_TENANT as DEFAULT_TENANT  # its runs are kept unprefixed (`traces.tenants`)

if TYPE_CHECKING:
    from traces.store import TraceStore

log = logging.getLogger(__name__)

SCOPES = ("plan", "steps:write", "learn", "read", "metrics", "admin")
SCOPE_HELP = {
    "plan": "plan, replan and validate (POST /v1/plan, /v1/replan, /v1/validate; MCP plan, replan, validate)",
    "steps:write": "record executed steps (POST /v1/steps; MCP record_steps)",
    "learn": "retrain the failure model (POST /v1/retrain; MCP retrain)",
    "read": "read learned costs, action statistics and jobs (/v1/costs, /v1/actions, /v1/jobs; MCP costs, "
    "action_stats)",
    "metrics": "read the Prometheus metrics (GET /metrics)",
    "admin": "every scope above",
}
KEY_PREFIX = "ppk_"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TENANT_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAX_TENANT = 32


class KeyInputError(ValueError):
    """A key name, tenant, scope or quota the key commands cannot use (the CLI's exit 2)."""


class Principal(BaseModel):
    """Who a request acts for: a key's name (or `(token)`, `(anonymous)`, `(local)`), its tenant, its scopes
    and its own quotas (None: the server's defaults)."""

    model_config = ConfigDict(frozen=True)

    name: str
    tenant: str
    scopes: frozenset[str]
    rps: float | None = None
    max_concurrent_plans: int | None = None
    body_mb_per_s: float | None = None

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes


# The server's --token: one admin of the default tenant, whose run ids are unprefixed
TOKEN_PRINCIPAL = Principal(name="(token)", tenant=DEFAULT_TENANT, scopes=frozenset({"admin"}))
# Every request of a server started --insecure (loopback only), and the stdio MCP server's one user
ANONYMOUS = Principal(name="(anonymous)", tenant=DEFAULT_TENANT, scopes=frozenset({"admin"}))
LOCAL = Principal(name="(local)", tenant=DEFAULT_TENANT, scopes=frozenset({"admin"}))


class KeyInfo(BaseModel):
    """A key as `portfolio keys list` shows it: everything but the key and its hash."""

    name: str
    tenant: str
    scopes: list[str]
    created: str
    last_used: str | None = None
    rps: float | None = Field(default=None, description="requests per second (None: the server's --rps)")
    max_concurrent_plans: int | None = Field(default=None, description="None: the server's --max-concurrent-plans")
    body_mb_per_s: float | None = Field(default=None, description="None: the server's --body-mb-per-s")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def parse_scopes(text: str | list[str]) -> list[str]:
    """`"plan,steps:write"` -> `["plan", "steps:write"]`; KeyInputError naming the scopes there are."""
    names = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    unknown = [s for s in names if s not in SCOPES]
    if unknown or not names:
        what = f"unknown scope {unknown[0]!r}" if unknown else "no scope given"
        raise KeyInputError(f"{what}; expected a comma-separated list of: {', '.join(SCOPES)}")
    return sorted(set(names), key=SCOPES.index)


def check_tenant(tenant: str) -> str:
    if not TENANT_PATTERN.fullmatch(tenant):
        raise KeyInputError(
            f"tenant {tenant!r}: expected 1 to {MAX_TENANT} characters, lower-case letters, digits, '-' and '_', "
            "starting with a letter or digit"
        )
    return tenant


def add_key(
    store: TraceStore,
    name: str,
    tenant: str,
    scopes: list[str] | str,
    *,
    rps: float | None = None,
    max_concurrent_plans: int | None = None,
    body_mb_per_s: float | None = None,
) -> str:
    """Create a key for principal `name` of `tenant` with `scopes` and return it: the only time it is seen.
    KeyInputError for a bad or taken name, tenant, scope or quota."""
    from traces.keys import insert_key

    if not NAME_PATTERN.fullmatch(name):
        raise KeyInputError(
            f"key name {name!r}: expected 1 to 64 characters, letters, digits, '.', '-' and '_', starting with a "
            "letter or digit"
        )
    check_tenant(tenant)
    chosen = parse_scopes(scopes)
    for flag, value in (("--rps", rps), ("--body-mb-per-s", body_mb_per_s)):
        if value is not None and not (value > 0 and value != float("inf")):
            raise KeyInputError(f"{flag} {value}: expected a positive number")
    if max_concurrent_plans is not None and max_concurrent_plans < 1:
        raise KeyInputError(f"--max-concurrent-plans {max_concurrent_plans}: expected at least 1")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = dict(
        name=name,
        tenant=tenant,
        scopes=",".join(chosen),
        hash=hash_key(key),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        rps=rps,
        max_concurrent_plans=max_concurrent_plans,
        body_mb_per_s=body_mb_per_s,
    )
    if not insert_key(store, row):
        raise KeyInputError(f"a key named {name!r} exists already: revoke it first, or choose another name")
    return key


def list_keys(store: TraceStore) -> list[KeyInfo]:
    from traces.keys import key_rows

    return [_info(row) for row in key_rows(store)]


def revoke_key(store: TraceStore, name: str) -> None:
    """Delete the key called `name`: servers refuse it within `KeyRing.ttl_s`. KeyInputError if there is none."""
    from traces.keys import delete_key

    if not delete_key(store, name):
        known = [k.name for k in list_keys(store)]
        raise KeyInputError(f"no key named {name!r}; the keys are: {', '.join(known) or '(none)'}")


def count_keys(store: TraceStore) -> int:
    from traces.keys import key_rows

    return len(key_rows(store))


def _info(row: dict) -> KeyInfo:
    return KeyInfo(**{k: v for k, v in row.items() if k != "hash"} | {"scopes": row["scopes"].split(",")})


def principal_of(row: dict) -> Principal:
    return Principal(
        name=row["name"],
        tenant=row["tenant"],
        scopes=frozenset(row["scopes"].split(",")),
        rps=row["rps"],
        max_concurrent_plans=row["max_concurrent_plans"],
        body_mb_per_s=row["body_mb_per_s"],
    )


class KeyRing:
    """The keys of a trace store, as a server checks them: `principal(key)` is the key's principal, or None
    for a key the store does not hold. What the store said is cached for `ttl_s` per key (a revoked key works
    for at most that long), at most `max_cached` keys; `last_used` is written at most once per `touch_s`."""

    def __init__(self, store: TraceStore, ttl_s: float = 1.0, max_cached: int = 4096, touch_s: float = 60.0) -> None:
        self.store, self.ttl_s, self.max_cached, self.touch_s = store, ttl_s, max_cached, touch_s
        self._cache: OrderedDict[str, tuple[float, Principal | None]] = OrderedDict()
        self._touched: dict[str, float] = {}
        self._lock = threading.Lock()  # lookups run on several threads

    def cached(self, key: str) -> tuple[bool, Principal | None]:
        """(True, principal) when the cache still answers for `key`; (False, None) when the store must."""
        entry = self._cache.get(hash_key(key))
        if entry is not None and entry[0] > time.monotonic():
            return True, entry[1]
        return False, None

    def principal(self, key: str) -> Principal | None:
        """The key's principal from the store (blocking: call it on a thread), cached for `ttl_s`."""
        from traces.keys import key_by_hash, touch_key

        digest = hash_key(key)
        row = key_by_hash(self.store, digest)
        found = principal_of(row) if row is not None and secrets.compare_digest(row["hash"], digest) else None
        now = time.monotonic()
        with self._lock:
            self._cache[digest] = (now + self.ttl_s, found)
            self._cache.move_to_end(digest)
            while len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
            touch = found is not None and now - self._touched.get(digest, -self.touch_s) >= self.touch_s
            if touch:
                self._touched[digest] = now
        if touch and found is not None:
            try:
                touch_key(self.store, digest, datetime.now(UTC).isoformat(timespec="seconds"))
            except Exception as error:  # a busy store: the key still works, `last_used` waits for the next time
                log.debug("could not note the use of key %s: %s", found.name, error)
        return found
