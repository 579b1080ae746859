"""Backup and compaction of a trace database, safe while other processes write to it.

`backup` uses SQLite's online backup API (`sqlite3.Connection.backup`) through the store's own connection, so
the source file is only ever read by SQLite (see `traces.connection`); all pages are copied in one step, which
gives one consistent snapshot, and in WAL mode that read does not block writers. `vacuum` rebuilds the file
without its free pages (after `TraceStore.prune_models`, say) and truncates the WAL.

On PostgreSQL the server does both better: `backup` refuses with the command that does it (`pg_dump`), and
`vacuum` runs `VACUUM` on the trace tables and reports the database's size before and after.
"""

from __future__ import annotations

import os
import sqlite3

from traces.backends import POSTGRES
from traces.errors import TraceStoreError, translate
from traces.store import TraceStore


def _size(conn: sqlite3.Connection) -> int:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    return int(pages * conn.execute("PRAGMA page_size").fetchone()[0])


def backup(store: TraceStore, dest: str | os.PathLike[str]) -> int:
    """Copy `store` to the new file `dest`; returns the copy's size in bytes. Refuses an existing `dest`, or one
    with a -wal or -journal file beside it (SQLite would replay that into the copy)."""
    target = os.fspath(dest)
    if store.backend is POSTGRES:
        raise TraceStoreError(
            f"{store.path}: a PostgreSQL trace store is backed up by the server's own tools: pg_dump --format=custom "
            "--file=FILE DBNAME (restore with pg_restore); `portfolio traces backup` copies SQLite files."
        )
    if any(os.path.lexists(target + suffix) for suffix in ("", "-wal", "-journal")):
        raise TraceStoreError(
            f"{target}: already exists; a backup writes a new file (remove it or choose another path)."
        )

    def copy_all() -> int:
        try:  # errors here are the destination's (a read of the source in WAL mode waits for nobody)
            copy = sqlite3.connect(target, isolation_level=None)
            try:
                store.db.conn.backup(copy)  # every page in one step: one consistent snapshot
                return _size(copy)
            finally:
                copy.close()
        except sqlite3.Error as error:
            raise translate(target, error) from error

    return store._retry(copy_all)


def vacuum(store: TraceStore) -> tuple[int, int]:
    """Rebuild the database without free pages and fold the WAL back into it; returns its size in bytes before
    and after. Waits for other writers (and retries) like any write."""
    if store.backend is POSTGRES:
        size = "SELECT pg_database_size(current_database())"
        before = store._retry(lambda: int(store.db.execute(size).fetchone()[0]))
        store._retry(lambda: store.db.execute("VACUUM"))
        return before, store._retry(lambda: int(store.db.execute(size).fetchone()[0]))
    before = store._retry(lambda: _size(store.db.conn))
    store._retry(lambda: store.db.execute("VACUUM"))
    store._retry(lambda: store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
    return before, store._retry(lambda: _size(store.db.conn))
