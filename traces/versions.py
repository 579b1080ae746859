"""Model version numbers that are never issued twice, even after the rows that carried them were deleted.

The service and its planner workers tell models apart by version alone: a worker reloads when the version the
server names is not the one it holds. A number issued again (delete the newest model, retrain: max(version) + 1
is the deleted one's) looked like the model already loaded, and a server that could not read the deleted model
answered 503 until it was restarted. So each kind of model (its table, `models` or `selection_models`) keeps the
highest number it ever issued in `model_versions`, and the next is one more than the larger of that and the
table's own highest.

The table is made by the first save that needs it, in that save's transaction, outside the numbered migrations
of `traces.schema`: a release that does not know it ignores it, and a store saved to before it existed counts
from its newest row (a version deleted before this release is not known, and can come back once).

    version = next_version(store, "models")   # inside the save's write transaction
    newest = latest_version(store, "models")  # one indexed query: no row is parsed
"""

from __future__ import annotations

from typing import Any

TABLE = "model_versions"
KINDS = ("models", "selection_models")
_CREATE = f"CREATE TABLE IF NOT EXISTS {TABLE} (kind TEXT PRIMARY KEY, issued INTEGER NOT NULL)"


def next_version(store: Any, kind: str) -> int:
    """Issue the next version of `kind` (one of `KINDS`); call inside the write transaction that stores it."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of model {kind!r}; expected one of {', '.join(KINDS)}")
    db = store.db
    db.execute(_CREATE)
    stored = db.execute(f"SELECT coalesce(max(version), 0) FROM {kind}").fetchone()[0]
    row = db.execute(f"SELECT issued FROM {TABLE} WHERE kind = ?", [kind]).fetchone()
    version = max(int(stored), int(row[0]) if row else 0) + 1
    db.execute(
        f"INSERT INTO {TABLE} (kind, issued) VALUES (?, ?) ON CONFLICT (kind) DO UPDATE SET issued = excluded.issued",
        [kind, version],
    )
    return version


def latest_version(store: Any, kind: str = "models") -> int | None:
    """The newest stored version of `kind`, None before the first; reads no model, so a row that cannot be
    parsed does not stop a caller that only needs the number (a worker starting, the service watching)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of model {kind!r}; expected one of {', '.join(KINDS)}")
    return store._retry(lambda: store.db.execute(f"SELECT max(version) FROM {kind}").fetchone()[0])
