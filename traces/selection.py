"""The trace store's part in configuration selection: the recorded plans grouped by domain, and the fitted
selection models (`learning.selection`), versioned like the failure models but in a table of their own
(`selection_models`, schema 2), so loading one kind never finds the other.

    for row in domain_plans(store): ...                  # runs that name their domain, with their plans
    version = save_selection_model(store, text, {...})   # JSON text, never a pickle
    stored = latest_selection_model(store)               # None before the first save

Runs recorded before schema 2 have no domain and are skipped: an old trace file opens (the migration adds the
column), it just has nothing to select from yet. Functions, not `TraceStore` methods, so the store stays about
storage; they go through the store's own retry and transaction helpers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from traces.attempt_details import StoredAttempt
from traces.store import TraceStore, _now
from traces.stored_json import OBJECT, read_json, row_name
from traces.versions import next_version


@dataclass(frozen=True)
class DomainPlan:
    """One recorded plan of a run whose domain is known; its attempts as stored (JSON read back, not checked
    against `StoredAttempt`: a store written by an older release reads as it was written)."""

    domain: str
    fingerprint: str | None
    attempts: list[StoredAttempt] = field(default_factory=list)
    latency_ms: float | None = None


@dataclass(frozen=True)
class StoredSelection:
    version: int
    created: str
    metadata: dict[str, Any]
    model: str  # JSON text


def domain_plans(store: TraceStore, chunk_size: int = 5000) -> Iterator[DomainPlan]:
    """Every plan recorded under a run that names its domain, oldest first (keyset pages: no statement stays
    open between them). Rows whose attempts are not JSON (or nest deeper than Python's stack) are skipped rather
    than fatal: one damaged row must not stop training on the rest."""
    sql = (
        "SELECT plans.id, runs.domain, runs.fingerprint, plans.attempts, plans.latency_ms FROM plans "
        "JOIN runs ON runs.id = plans.run_id WHERE runs.domain IS NOT NULL AND plans.id > ? "
        "ORDER BY plans.id LIMIT ?"
    )
    after = 0
    while True:
        rows = store._retry(lambda: store.db.execute(sql, [after, chunk_size]).fetchall())
        if not rows:
            return
        for plan_id, domain, fingerprint, attempts, latency in rows:
            after = plan_id
            try:
                parsed = json.loads(attempts or "[]")
            except (json.JSONDecodeError, RecursionError):  # damaged, or nested past Python's stack
                continue
            if isinstance(parsed, list):
                yield DomainPlan(
                    domain, fingerprint, [cast(StoredAttempt, a) for a in parsed if isinstance(a, dict)], latency
                )


def save_selection_model(store: TraceStore, model_json: str, metadata: dict[str, Any]) -> int:
    """Store a selection model (JSON text) under the next version number (1, 2, ...; never one issued before:
    `traces.versions`) and return it."""

    def body() -> int:
        version = next_version(store, "selection_models")
        store.db.execute(
            "INSERT INTO selection_models (created, version, metadata, model) VALUES (?, ?, ?, ?)",
            [_now(), version, json.dumps(metadata, default=str), model_json],
        )
        return version

    return store._write(body)


def latest_selection_model(store: TraceStore) -> StoredSelection | None:
    """The selection model with the highest version, or None before the first save; `BadRowError` when its
    metadata is not a JSON object (the model's own text is `learning.selection`'s to read)."""
    sql = "SELECT version, created, metadata, model FROM selection_models ORDER BY version DESC LIMIT 1"
    rows = store._retry(lambda: store.db.execute(sql).fetchall())
    if not rows:
        return None
    version, created, metadata, model = rows[0]
    where = row_name(store.path, "selection_models", f"version {version}", "metadata")
    return StoredSelection(version, created, read_json(OBJECT, metadata, where), model)


def prune_selection_models(store: TraceStore, keep: int) -> int:
    """Delete every selection model version but the newest `keep` (at least 1); returns how many went."""
    sql = (
        "DELETE FROM selection_models WHERE version NOT IN "
        "(SELECT version FROM selection_models ORDER BY version DESC LIMIT ?)"
    )
    return store._prune(sql, keep)
