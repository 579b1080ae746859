"""One holder at a time across every process and host sharing a trace store: what keeps a fleet of servers (and
`portfolio retrain` run beside them) from fitting two models of one store at once.

    with fleet_lock(store, "retrain"):          # FleetBusy at once when another process holds it
        ...
    with fleet_lock(store, "retrain", wait=True):  # or wait for it

`store` is a `TraceStore` or its target as given to `--traces` (an opaque string: a path or a URL). The lock is
the store's own kind of lock, so it is released when its holder ends however it ends (a SIGKILL included): no
stale lock for an operator to clear.

- A SQLite file: an OS advisory lock (`fcntl.flock`) on a lock file beside the database, `<file>.<name>.lock`
  (`FleetLockError`, a `TraceStoreError`, when it can be neither created nor opened), never on the database
  file itself (`traces.connection`: only SQLite may open it). Every process on the host that shares the file
  shares the lock; several hosts on one SQLite file over a network file system is no deployment SQLite
  supports in the first place.
- A PostgreSQL URL: a session advisory lock (`pg_try_advisory_lock` / `pg_advisory_lock`, released with
  `pg_advisory_unlock`) on the store's own connection, keyed by the name (`_postgres_lock`). The store backend
  plugs in by exposing its connection as `store.db` with an `execute(sql)` that returns a cursor (as
  sqlite-utils' `Database` does); a target string alone cannot hold a session, so a URL must come with its store.
- An in-memory or temporary database: no other process can see it, so there is nothing to lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from typing import Any

from traces.connection import database_key, is_private
from traces.errors import TraceStoreError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class FleetBusy(Exception):
    """Another process holds the lock (`fleet_lock` without `wait`)."""


def target_of(store: Any) -> str:
    """The store's target as a string: `store` itself when it is one (or a path), else its `target` or `path`."""
    if isinstance(store, (str, os.PathLike)):
        return os.fspath(store)
    return os.fspath(getattr(store, "target", None) or store.path)


def lock_path(target: str, name: str) -> str:
    """The lock file of the SQLite database at `target` for the lock `name`: beside the database's real path."""
    return f"{database_key(target)}.{name}.lock"


@contextlib.contextmanager
def fleet_lock(store: Any, name: str = "retrain", *, wait: bool = False) -> Iterator[None]:
    """Hold the store-wide lock `name` for the block (module docstring); `FleetBusy` when another process holds it
    and not `wait`, else block until it is free."""
    target = target_of(store)
    if target.startswith(POSTGRES_SCHEMES):
        if isinstance(store, (str, os.PathLike)):
            raise TypeError("a PostgreSQL store's lock is held on the store's connection: pass the store, not its URL")
        with _postgres_lock(store, name, wait=wait):
            yield
        return
    if is_private(target):
        yield
        return
    with _file_lock(lock_path(target, name), name, wait=wait):
        yield


class FleetLockError(TraceStoreError):
    """The lock file cannot be created or opened (a read-only directory, another user's file)."""


@contextlib.contextmanager
def _file_lock(path: str, name: str, *, wait: bool) -> Iterator[None]:
    """`flock` on `path`: per open file, so two users in one process exclude each other too, and released by the
    kernel when the holder exits. Not inherited by the programs a holder starts (Python opens files
    close-on-exec). Created as readable and writable as the database beside it (by `os.stat`: never an open), so
    whoever may write the store may take its lock; an existing one read-only is enough for `flock`."""
    database = path.removesuffix(f".{name}.lock")
    try:
        mode = os.stat(database).st_mode & 0o666
    except OSError:
        mode = 0o600
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as error:
            raise FleetLockError(  # no path: a server's client may read this
                f"cannot create or open the trace store's {name} lock file (beside it, `<file>.{name}.lock`): "
                f"{error.strerror}; it must be writable, or exist and be readable, for every process sharing the store"
            ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise FleetBusy(f"a {name} is running on this trace store (another server or process holds it)") from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def advisory_key(name: str) -> int:
    """A signed 64-bit key for PostgreSQL's advisory locks, the same for `name` in every process."""
    return int.from_bytes(hashlib.sha256(f"portfolio:{name}".encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def _postgres_lock(store: Any, name: str, *, wait: bool) -> Iterator[None]:
    """A session advisory lock on the store's connection (`store.db.execute`), keyed by `advisory_key(name)`. The
    key is an integer this module computes, so it is written into the query: no parameter style to agree on."""
    key = advisory_key(name)
    if wait:
        store.db.execute(f"SELECT pg_advisory_lock({key})").fetchone()
    elif not store.db.execute(f"SELECT pg_try_advisory_lock({key})").fetchone()[0]:
        raise FleetBusy(f"a {name} is running on this trace store (another server or process holds it)")
    try:
        yield
    finally:
        store.db.execute(f"SELECT pg_advisory_unlock({key})").fetchone()
