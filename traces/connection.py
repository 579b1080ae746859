"""One connection per database per process, shared by every `TraceStore` on that SQLite file or PostgreSQL URL.

`acquire(path, connect)` hands the same `SharedConnection` to every `TraceStore`, `Planner` and `Agent` on a
file (keyed by the real path, `database_key`, so `./t.db` and a symlink to it are one; `connect` opens it the
first time) and `release` closes it when the last user is done; `open_connections` lists what is open. Several
threads may share it (the HTTP service does): `SharedConnection.lock` serialises whole transactions, so one
caller can never commit, see or roll back another's half-done batch. A forked child forgets the connections it
inherited without closing them: SQLite connections must not cross `fork()`, and closing them in the child could
checkpoint under the parent.

On PostgreSQL the same sharing holds (one connection a URL per process, its lock held for a whole transaction;
the service's threads already take turns on the store); the server's locks are not the process's, so nothing
below about files applies there. A PostgreSQL connection that broke (the server restarted) is replaced by
`reconnect` under the lock, by the store's retry loop (`traces.transactions`).

Nothing else in this project may open the database file: SQLite's POSIX advisory locks belong to the process,
so closing any other descriptor of the file drops the locks of the live connections, and in WAL mode the next
process to close its connection then deletes the -wal and -shm files under them. Bad files are recognised from
SQLite's own errors instead. The SQLite documentation behind this, and what was measured:
docs/decisions/one-connection-per-file.md.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from traces.targets import is_url, redact

_registry: dict[str, SharedConnection] = {}
_registry_lock = threading.Lock()


@dataclass(eq=False)
class SharedConnection:
    """A connection and the lock every user holds while it runs one operation or transaction on it."""

    key: str
    conn: Any  # sqlite3.Connection, or psycopg.Connection for a PostgreSQL URL
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0
    busy_timeout_ms: int | None = None  # the value last set on the connection (stores may differ)
    checked: bool = False  # opened, schema checked and found writable by its first user
    pid: int = field(default_factory=os.getpid)  # the process that opened it (see `release`)
    connect: Callable[[], Any] | None = None  # opens it again (`reconnect`)
    # an operation gave up on the server (away): the next ones try once each until one succeeds (`Transactions`)
    away: bool = False

    def reconnect(self) -> None:
        """Replace a broken connection with a new one (PostgreSQL, after the server restarted); call holding
        `lock`. The old one is closed quietly: it is already gone."""
        if self.connect is None:
            return
        try:
            self.conn.close()
        except Exception:  # a broken connection may fail to close; it is dropped either way
            pass
        self.conn = self.connect()
        self.busy_timeout_ms = None


def database_key(path: str | os.PathLike[str]) -> str:
    """The registry key of a database path: its real absolute path (a stat of the path, never an open); a
    PostgreSQL URL is its own key."""
    if is_url(path):
        return str(path)
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def is_private(path: str | os.PathLike[str]) -> bool:
    """An in-memory (":memory:") or temporary ("") database: SQLite gives every connection its own, so there is
    no file to share a connection to, and two stores on ":memory:" are two databases."""
    text = os.fspath(path)
    return text in ("", ":memory:") or (
        text.startswith("file:") and ("mode=memory" in text or text.startswith("file::memory:"))
    )


def acquire(path: str | os.PathLike[str], connect: Callable[[str], Any]) -> SharedConnection:
    """The process's connection to the database at `path`, opened with `connect(path)` for its first user; a
    private connection of its own for an in-memory or temporary database (`is_private`), never registered."""
    if is_private(path):
        return SharedConnection(os.fspath(path), connect(os.fspath(path)), users=1)
    key = database_key(path)
    with _registry_lock:
        shared = _registry.get(key)
        if shared is None:
            text = os.fspath(path)
            again = (lambda: connect(text)) if is_url(text) else None
            shared = _registry[key] = SharedConnection(key, connect(text), connect=again)
        shared.users += 1
        return shared


def release(shared: SharedConnection) -> None:
    """One user fewer; the last one closes the connection (through SQLite, which keeps the locks right)."""
    if shared.pid != os.getpid():
        return  # inherited across fork(): the parent owns it
    with _registry_lock:
        shared.users -= 1
        if shared.users > 0:
            return
        if _registry.get(shared.key) is shared:
            del _registry[shared.key]
    with shared.lock:  # a thread still inside an operation finishes it first
        try:
            shared.conn.close()
        except Exception:  # a PostgreSQL connection already broken; nothing left to close
            if not is_url(shared.key):
                raise


def open_connections() -> dict[str, int]:
    """Real path (or URL, its password hidden) -> number of users, for every database this process has open (for
    tests and diagnostics)."""
    with _registry_lock:
        return {redact(key): shared.users for key, shared in _registry.items()}


def _forget_after_fork() -> None:
    global _registry_lock
    _registry.clear()  # never close an inherited connection: its locks and WAL belong to the parent
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
