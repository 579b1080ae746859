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

from traces import recording
from traces.store import TraceStore

TABLE = recording.PROVENANCE


def note_provenance(store: TraceStore, steps: Sequence[tuple[str, int]], tenant: str, principal: str) -> None:
    """Record that `principal` of `tenant` posted `steps` (their `(run_id, step)`) in a transaction of its own; a
    step that already has a provenance keeps it (a retried post changes nothing, as in `traces.recording`). Steps
    recorded with their provenance go through `TraceStore.record_steps(..., provenance=...)` instead, in one
    transaction."""
    if steps:
        store._write(lambda: recording.keep_provenance(store.db, store.backend, steps, tenant, principal))


def provenance(store: TraceStore, run_id: str) -> list[tuple[int, str, str, str]]:
    """`(step, tenant, principal, recorded)` of each step of `run_id` posted through the service, by step."""

    def read() -> list[tuple[int, str, str, str]]:
        if not store.backend.table_exists(store.db, TABLE):
            return []
        sql = f"SELECT step, tenant, principal, recorded FROM {TABLE} WHERE run_id = ? ORDER BY step"
        return [tuple(row) for row in store.db.execute(sql, [run_id]).fetchall()]

    return store._retry(read)
