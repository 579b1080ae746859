"""The trace store's table of API keys (`api_keys`): one row per key, holding the key's SHA-256 and never the key.

    insert_key(store, row)        # a new key; False if its name is taken
    delete_key(store, name)       # True if there was one
    key_rows(store)               # every row, by name
    key_by_hash(store, digest)    # the row of one key, or None
    touch_key(store, digest, at)  # when it was last used

The table is made by the first `insert_key`, outside the numbered migrations of `traces.schema`: only the service
reads it, a release that does not know it ignores it, and a store that never had a key has no table (the readers
then find no rows). Functions, not `TraceStore` methods, like `traces.task_sources`; what a key means (scopes,
tenants, hashing) is the service's business (`portfolio.serve.keys`).
"""

from __future__ import annotations

from typing import Any

from traces.store import TraceStore

TABLE = "api_keys"
COLUMNS = (
    "name",
    "tenant",
    "scopes",  # comma-separated
    "hash",  # hex SHA-256 of the key
    "created",
    "last_used",
    "rps",  # NULL: the server's default
    "max_concurrent_plans",
    "body_mb_per_s",
)
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (name TEXT PRIMARY KEY, tenant TEXT NOT NULL, scopes TEXT NOT NULL, "
    "hash TEXT NOT NULL UNIQUE, created TEXT NOT NULL, last_used TEXT, rps FLOAT, max_concurrent_plans INTEGER, "
    "body_mb_per_s FLOAT)"
)


def _exists(store: TraceStore) -> bool:
    return store.backend.table_exists(store.db, TABLE)


def insert_key(store: TraceStore, row: dict[str, Any]) -> bool:
    """Add a key (`row` has the `COLUMNS`; `last_used` may be left out); False when the name is taken."""
    values = [row.get(column) for column in COLUMNS]

    def body() -> bool:
        store.db.execute(_CREATE)
        placeholders = ", ".join("?" * len(COLUMNS))
        sql = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({placeholders}) ON CONFLICT DO NOTHING"
        return store.db.execute(sql, values).rowcount == 1

    return store._write(body)


def delete_key(store: TraceStore, name: str) -> bool:
    """Remove the key called `name`; False when there is none."""

    def body() -> bool:
        return _exists(store) and store.db.execute(f"DELETE FROM {TABLE} WHERE name = ?", [name]).rowcount == 1

    return store._write(body)


def key_rows(store: TraceStore) -> list[dict[str, Any]]:
    """Every key's row (the `COLUMNS`), sorted by name."""

    def read() -> list[dict[str, Any]]:
        if not _exists(store):
            return []
        cursor = store.db.execute(f"SELECT {', '.join(COLUMNS)} FROM {TABLE} ORDER BY name")
        return [dict(zip(COLUMNS, row)) for row in cursor.fetchall()]

    return store._retry(read)


def key_by_hash(store: TraceStore, digest: str) -> dict[str, Any] | None:
    """The row whose `hash` is `digest`, or None."""

    def read() -> dict[str, Any] | None:
        if not _exists(store):
            return None
        row = store.db.execute(f"SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE hash = ?", [digest]).fetchone()
        return dict(zip(COLUMNS, row)) if row else None

    return store._retry(read)


def touch_key(store: TraceStore, digest: str, at: str) -> None:
    """Set the key's `last_used` to `at` (an ISO timestamp)."""

    def body() -> None:
        if _exists(store):
            store.db.execute(f"UPDATE {TABLE} SET last_used = ? WHERE hash = ?", [at, digest])

    store._write(body)
