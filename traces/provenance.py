"""Who recorded each step through the service: `step_provenance`, one row per step identity `(run_id, step)`
with the tenant and the principal (the API key's name) that posted it first.

    note_provenance(store, [(run_id, step), ...], tenant, principal)
    provenance(store, run_id)   # [(step, tenant, principal, recorded), ...]

A table of its own beside `steps`, keyed by the step's identity, rather than columns of `steps`: steps also come
from JSONL imports and from the Python API, which have no principal, and the table is made on first use outside
the numbered migrations of `traces.schema`, so a store without it is still current. Functions, not `TraceStore`
methods, like `traces.task_sources`.
"""

from __future__ import annotations

from collections.abc import Sequence

from traces.store import TraceStore, _now

TABLE = "step_provenance"
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (run_id TEXT NOT NULL, step INTEGER NOT NULL, tenant TEXT NOT NULL, "
    "principal TEXT NOT NULL, recorded TEXT NOT NULL, PRIMARY KEY (run_id, step))"
)


def note_provenance(store: TraceStore, steps: Sequence[tuple[str, int]], tenant: str, principal: str) -> None:
    """Record that `principal` of `tenant` posted `steps` (their `(run_id, step)`); a step that already has a
    provenance keeps it (a retried post changes nothing, as in `traces.recording`)."""
    if not steps:
        return
    now = _now()
    rows = [(run_id, step, tenant, principal, now) for run_id, step in steps]

    def body() -> None:
        store.db.execute(_CREATE)
        columns = ("run_id", "step", "tenant", "principal", "recorded")
        store.backend.insert_rows(store.db.conn, TABLE, columns, rows, skip_existing=True)

    store._write(body)


def provenance(store: TraceStore, run_id: str) -> list[tuple[int, str, str, str]]:
    """`(step, tenant, principal, recorded)` of each step of `run_id` posted through the service, by step."""

    def read() -> list[tuple[int, str, str, str]]:
        if not store.backend.table_exists(store.db, TABLE):
            return []
        sql = f"SELECT step, tenant, principal, recorded FROM {TABLE} WHERE run_id = ? ORDER BY step"
        return [tuple(row) for row in store.db.execute(sql, [run_id]).fetchall()]

    return store._retry(read)
