"""How every `TraceStore` operation reaches the database: holding the shared connection, retried while another
writer has the file locked, and each write one `BEGIN IMMEDIATE` transaction that commits or rolls back whole.

Apart from `traces.store` because it is the one part of the store that is about concurrency rather than about
runs, plans, steps and models: `TraceStore` inherits `_retry`, `_write` and `_translate` from `Transactions`, and
the table modules next to it (`traces.selection`, `traces.task_sources`, `traces.maintenance`) call them on a
store. The design (WAL, busy_timeout, then backoff with jitter; the connection's lock held from BEGIN to COMMIT, so
only the transaction a call began is ever rolled back) is described in `traces.store`.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

import sqlite_utils

from traces import connection
from traces.errors import DatabaseLockedError, TraceStoreError, translate

log = logging.getLogger("traces.store")  # the store's log: what a transaction logs is the store's doing
T = TypeVar("T")


def _is_locked(error: sqlite3.OperationalError) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text


class Transactions:
    """The retrying, transactional access `TraceStore` is built on; it sets these attributes in `__init__`."""

    path: str
    busy_timeout_ms: int
    retries: int
    backoff_s: float
    _shared: connection.SharedConnection | None
    db: sqlite_utils.Database

    def _retry(self, operation: Callable[[], T]) -> T:
        """Run `operation` holding the shared connection, retrying on "database is locked" (with the connection
        released between attempts) and translating SQLite errors to ours. Never rolls anything back: only
        `_write` ends a transaction, and only the one it began."""
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            shared = self._shared
            if shared is None:
                raise TraceStoreError(f"{self.path}: the trace store is closed.")
            try:
                with shared.lock:
                    if shared.busy_timeout_ms != self.busy_timeout_ms:
                        shared.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                        shared.busy_timeout_ms = self.busy_timeout_ms
                    return operation()
            except sqlite3.OperationalError as error:
                if not _is_locked(error):
                    raise self._translate(error) from error
                if attempt == self.retries:
                    raise DatabaseLockedError(
                        f"{self.path}: database still locked by another writer after {self.retries} retries "
                        f"(busy_timeout {self.busy_timeout_ms} ms each); nothing from this batch was written."
                    ) from error
                log.debug("trace store %s locked, retry %d in %.3f s", self.path, attempt + 1, delay)
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 2.0)
            except sqlite3.DatabaseError as error:
                raise self._translate(error) from error
        raise AssertionError("unreachable")

    def _write(self, body: Callable[[], T], *, commit: bool = True) -> T:
        """Run `body` in one BEGIN IMMEDIATE transaction, retried as a whole when the database is locked. The
        shared connection's lock is held from BEGIN to COMMIT, so no other thread runs anything in between."""

        def attempt() -> T:
            conn = self.db.conn
            if conn.in_transaction:  # someone else's, left open on `db`: neither join nor end it
                raise TraceStoreError(
                    f"{self.path}: a transaction is already open on this process's connection (opened through "
                    "TraceStore.db and not ended); commit or roll it back first."
                )
            conn.execute("BEGIN IMMEDIATE")  # if this fails, no transaction began and there is nothing to undo
            try:
                result = body()
                conn.execute("COMMIT" if commit else "ROLLBACK")
                return result
            except BaseException:
                if conn.in_transaction:  # ours: BEGIN above succeeded and the lock kept everyone else out
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error as error:  # keep the first error; SQLite rolls back on close anyway
                        log.warning("trace store %s: rollback failed: %s", self.path, error)
                raise

        return self._retry(attempt)

    def _translate(self, error: sqlite3.Error) -> TraceStoreError:
        """SQLite's error as ours, named by what the user can do about it."""
        return translate(self.path, error)
