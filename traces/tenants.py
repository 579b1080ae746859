"""Whose steps and models are whose: the tenants of the service's API keys, as the trace store tells them apart.

The service keeps a tenant's run ids as `@tenant/run-id` (`portfolio.serve.tenancy`); the default tenant's (the
CLI's, the Python API's, a JSONL import's, the service's --token) are kept as they are and never start with `@`.
Failure models are stored per tenant (`models.tenant`, schema 7): a tenant's model is fit on its steps alone,
the pooled model (`POOLED`) on every tenant's, for a server started with `--pool-learning`.

    run_prefix("acme") -> "@acme/"          run_prefix("default") -> ""
    tenant_of("@acme/r1") -> "acme"         tenant_of("r1") -> "default"
    step_filter("acme") -> ("(run_id >= ? AND run_id < ?)", ["@acme/", "@acme0"])
    tenants_with_steps(store) -> ["acme", "default"]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store's base, not `traces.store.TraceStore`, which imports this module
    from traces.transactions import Transactions

DEFAULT_TENANT = "default"
POOLED = "*"  # the model of every tenant's steps; no tenant's name (`portfolio.serve.keys.TENANT_PATTERN`)
RESERVED = "@"


def run_prefix(tenant: str) -> str:
    """What the tenant's stored run ids start with ("" for the default tenant)."""
    return "" if tenant == DEFAULT_TENANT else f"{RESERVED}{tenant}/"


def tenant_of(run_id: str) -> str:
    """The tenant a stored run id belongs to."""
    if not run_id.startswith(RESERVED):
        return DEFAULT_TENANT
    return run_id[1:].partition("/")[0]


def step_filter(tenant: str, column: str = "run_id") -> tuple[str, list[str]]:
    """An SQL condition on a run id `column` of the `steps` table selecting the tenant's steps (every step for
    `POOLED`), and its parameters. Ranges rather than `substr`, so that SQLite may use the index on run ids: the
    ids starting with "@acme/" are those from "@acme/" up to "@acme0" ("0" follows "/"), and the ids not
    starting with "@" those below "@" or from "A" ("A" follows "@")."""
    if tenant == POOLED:
        return "1 = 1", []
    if tenant == DEFAULT_TENANT:
        return f"({column} < ? OR {column} >= ?)", [RESERVED, chr(ord(RESERVED) + 1)]
    low = run_prefix(tenant)
    return f"({column} >= ? AND {column} < ?)", [low, low[:-1] + chr(ord("/") + 1)]


def tenants_with_steps(store: Transactions) -> list[str]:
    """The tenants that have recorded steps, by name: one index seek per tenant, not a scan of the steps."""
    where, params = step_filter(DEFAULT_TENANT)
    least = "\x01" if store.backend.name == "postgresql" else "\x00"  # the smallest successor; PostgreSQL has no NUL

    def read() -> list[str]:
        found = []
        if store.db.execute(f"SELECT 1 FROM steps WHERE {where} LIMIT 1", params).fetchone() is not None:
            found.append(DEFAULT_TENANT)
        after = RESERVED
        while True:
            row = store.db.execute(
                "SELECT min(run_id) FROM steps WHERE run_id >= ? AND run_id < ?", [after, params[1]]
            ).fetchone()
            if row is None or row[0] is None:
                return sorted(found)
            tenant = tenant_of(row[0])
            if "/" in row[0] and tenant:
                found.append(tenant)
            after = run_prefix(tenant)[:-1] + chr(ord("/") + 1) if "/" in row[0] else row[0] + least

    return store._retry(read)
