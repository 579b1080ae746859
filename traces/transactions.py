"""How every `TraceStore` operation reaches the database: holding the shared connection, retried while another
writer has the database locked (or the PostgreSQL server is away), and each write one transaction that takes the
write lock first (`BEGIN IMMEDIATE` on SQLite, `BEGIN` and the advisory write lock on PostgreSQL:
`traces.backends`) and commits or rolls back whole.

Apart from `traces.store` because it is the one part of the store that is about concurrency rather than about
runs, plans, steps and models: `TraceStore` inherits `_retry`, `_write` and `_translate` from `Transactions`, and
the table modules next to it (`traces.selection`, `traces.task_sources`, `traces.maintenance`) call them on a
store. The design (WAL, busy_timeout, then backoff with jitter; the connection's lock held from BEGIN to COMMIT, so
only the transaction a call began is ever rolled back) is described in `traces.store`.

A PostgreSQL connection that broke (the server restarted, a network cut) is opened again before the next attempt,
and the operation is retried whole: a write that broke before its COMMIT was answered left nothing behind, and one
whose COMMIT landed is found again by the retry (steps are recorded idempotently, runs upserted). While the server
stays away the operation ends with `StoreUnavailableError` after the retries, and the operations after it try
once each, so that they answer at once, until one reaches the server again.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from traces import backends, connection
from traces.errors import DatabaseLockedError, StoreUnavailableError, TraceStoreError
from traces.targets import hide

log = logging.getLogger("traces.store")  # the store's log: what a transaction logs is the store's doing
T = TypeVar("T")


class Transactions:
    """The retrying, transactional access `TraceStore` is built on; it sets these attributes in `__init__`."""

    path: str  # as shown: a PostgreSQL URL's password is hidden (`traces.targets.redact`)
    busy_timeout_ms: int
    retries: int
    backoff_s: float
    backend: backends.Backend
    _shared: connection.SharedConnection | None
    _connect_error: TraceStoreError | None = None  # why the last reconnect failed (PostgreSQL)
    db: Any  # sqlite_utils.Database, or backends.PostgresDatabase

    def _retry(self, operation: Callable[[], T], retries: int | None = None) -> T:
        """Run `operation` holding the shared connection, retrying on "database is locked" (with the connection
        released between attempts), on PostgreSQL's serialisation failures and deadlocks and on a connection the
        server dropped (opened again first), and translating driver errors to ours. Never rolls anything back:
        only `_write` ends a transaction, and only the one it began. `retries`: fewer than the store's own (a
        health probe that must answer within its second, not wait out a server that is away). Once an operation
        has given up on a server that is away, the next ones on the connection try once each (a reconnect and the
        operation), not the retries, until one succeeds: during an outage every request answers at once, not after
        seconds of backoff each."""
        delay = self.backoff_s
        drivers = backends.driver_errors()
        retries = self.retries if retries is None else retries
        for attempt in range(retries + 1):
            shared = self._shared
            if shared is None:
                raise TraceStoreError(f"{self.path}: the trace store is closed.")
            if attempt == 0 and shared.connect is not None and shared.conn.closed:  # dropped since the last call
                self._reconnect(shared)  # (a later attempt follows the reconnect after its predecessor failed)
            try:
                with shared.lock:
                    if shared.busy_timeout_ms != self.busy_timeout_ms:
                        self._set_timeout(shared)
                    value = operation()
                shared.away = False
                return value
            except drivers as error:
                disconnected = backends.is_disconnected(error)
                if not (disconnected or backends.is_busy(error)):
                    raise self._translate(error) from error
                if disconnected and (attempt == retries or shared.away):
                    # libpq's reason the last reconnect failed says more than "closed"
                    reason = str(self._connect_error or self._translate(error)).rstrip(".")
                    tried = f"gave up after {retries} retries"
                    if shared.away:
                        tried = "tried once, as it was away at the last operation"
                    shared.away = True
                    raise StoreUnavailableError(
                        f"{reason}; {tried}, nothing from this operation was written."
                    ) from None
                if attempt == retries:
                    raise DatabaseLockedError(
                        f"{self.path}: database still locked by another writer after {retries} retries "
                        f"(busy_timeout {self.busy_timeout_ms} ms each); nothing from this batch was written."
                    ) from error
                log.debug("trace store %s %s, retry %d in %.3f s", self.path,
                          "unreachable" if disconnected else "locked", attempt + 1, delay)  # fmt: skip
                delay = self._pause(delay)
                if disconnected:
                    self._reconnect(shared)
        raise AssertionError("unreachable")

    @staticmethod
    def _pause(delay: float) -> float:
        """Sleep about `delay` seconds (jittered by half either way, so that writers that collided do not collide
        again) and return the next attempt's delay: doubled, at most 2 s."""
        time.sleep(delay * random.uniform(0.5, 1.5))
        return min(delay * 2, 2.0)

    def _set_timeout(self, shared: connection.SharedConnection) -> None:
        """How long the database itself waits for a lock before the retries above take over."""
        ms = int(self.busy_timeout_ms)
        if self.backend is backends.SQLITE:
            shared.conn.execute(f"PRAGMA busy_timeout = {ms}")
        else:
            shared.conn.execute(f"SET lock_timeout = {ms}")
        shared.busy_timeout_ms = self.busy_timeout_ms

    def _reconnect(self, shared: connection.SharedConnection) -> None:
        """Open a broken PostgreSQL connection again; a failure is left for the next attempt to meet."""
        with shared.lock:
            try:
                shared.reconnect()
                self._connect_error = None
            except backends.driver_errors() as error:
                self._connect_error = self._translate(error)
                log.debug("trace store %s: reconnect failed: %s", self.path, self._connect_error)

    def _write(self, body: Callable[[], T], *, commit: bool = True) -> T:
        """Run `body` in one write transaction (the write lock taken first), retried as a whole when the database
        is locked. The shared connection's lock is held from BEGIN to COMMIT, so no other thread runs anything
        in between."""

        def attempt() -> T:
            conn = self.db.conn
            if conn.in_transaction:  # someone else's, left open on `db`: neither join nor end it
                raise TraceStoreError(
                    f"{self.path}: a transaction is already open on this process's connection (opened through "
                    "TraceStore.db and not ended); commit or roll it back first."
                )
            conn.execute(self.backend.begin_write[0])  # if this fails, no transaction began: nothing to undo
            try:
                for statement in self.backend.begin_write[1:]:
                    conn.execute(statement)
                result = body()
                conn.execute("COMMIT" if commit else "ROLLBACK")
                return result
            except BaseException:
                try:
                    if conn.in_transaction:  # ours: BEGIN above succeeded and the lock kept everyone else out
                        conn.execute("ROLLBACK")
                except backends.driver_errors() as error:  # keep the first error; the server rolls back anyway
                    log.warning("trace store %s: rollback failed: %s", self.path, self._translate(error))
                raise

        return self._retry(attempt)

    def _translate(self, error: BaseException) -> TraceStoreError:
        """The driver's error as ours, named by what the user can do about it (a URL's password hidden)."""
        found = backends.translate(self.path, error)
        url = getattr(self, "_url", None)
        if url is None:
            return found
        hidden = hide(str(found), url)
        return found if hidden == str(found) else type(found)(hidden)
