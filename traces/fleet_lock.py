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
- A PostgreSQL URL: a session advisory lock (`pg_try_advisory_lock` / `pg_advisory_lock`) keyed by the name,
  held on a connection of its own, opened for the lock and closed with it (`_postgres_lock`): not on the store's
  shared connection, which the store may replace under the lock (a reconnect ends the session, and its locks
  with it), where `--wait` would block every other user of the process's connection, and where a second holder
  in the same process would be let in (a session may take its own advisory lock twice). A holder killed with
  SIGKILL ends its session, so the server frees the lock. `store` may be a `TraceStore` or the URL itself.
  Why, and what was tested: docs/decisions/fleet-lock.md.
- An in-memory or temporary database: no other process can see it, so there is nothing to lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from traces.connection import database_key, is_private
from traces.errors import TraceStoreError
from traces.targets import hide, is_url, redact

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 10.0  # the lock's own connection gives up connecting after this


class FleetBusy(Exception):
    """Another process holds the lock (`fleet_lock` without `wait`)."""


def target_of(store: Any) -> str:
    """The store's target as a string: `store` itself when it is one (or a path), else its URL as given (with its
    password: the lock connects with it), `target` or `path`."""
    if isinstance(store, (str, os.PathLike)):
        return os.fspath(store)
    return os.fspath(getattr(store, "_url", None) or getattr(store, "target", None) or store.path)


def lock_path(target: str, name: str) -> str:
    """The lock file of the SQLite database at `target` for the lock `name`: beside the database's real path."""
    return f"{database_key(target)}.{name}.lock"


@contextlib.contextmanager
def fleet_lock(store: Any, name: str = "retrain", *, wait: bool = False) -> Iterator[None]:
    """Hold the store-wide lock `name` for the block (module docstring); `FleetBusy` when another process holds it
    and not `wait`, else block until it is free."""
    target = target_of(store)
    if is_url(target):
        with _postgres_lock(target, name, wait=wait):
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
def _postgres_lock(url: str, name: str, *, wait: bool) -> Iterator[None]:
    """A session advisory lock keyed by `advisory_key(name)`, on a connection to `url` opened for it and closed
    after (module docstring). The key is an integer this module computes, so it is written into the query.
    `StoreUnavailableError` (or another `TraceStoreError`, the URL's password hidden) when the server cannot be
    reached. Should the server end the session while the block runs (a restart), the lock is gone with it:
    the block still ends normally, and that is logged (another process may have taken the lock meanwhile)."""
    from traces import backends

    key = advisory_key(name)
    shown = redact(url)
    try:
        conn = backends.connect_postgres(url, CONNECT_TIMEOUT_S)
    except backends.driver_errors() as error:
        raise _translated(url, error) from None
    try:
        try:
            if wait:  # no lock_timeout on this session (unless the URL sets one): wait as long as it takes
                conn.execute(f"SELECT pg_advisory_lock({key})").fetchone()
            elif not conn.execute(f"SELECT pg_try_advisory_lock({key})").fetchone()[0]:
                raise FleetBusy(f"a {name} is running on this trace store (another server or process holds it)")
        except backends.driver_errors() as error:
            raise _translated(url, error) from None
        try:
            yield
        finally:
            try:
                conn.execute(f"SELECT pg_advisory_unlock({key})").fetchone()
            except backends.driver_errors() as error:
                log.warning(
                    "trace store %s: the %s lock's session ended before the lock was released (%s); another "
                    "process may have held the lock meanwhile",
                    shown, name, _translated(url, error),
                )  # fmt: skip
    finally:
        try:
            conn.close()
        except Exception:  # a broken connection may fail to close; the server has ended its session anyway
            pass


def _translated(url: str, error: BaseException) -> TraceStoreError:
    """psycopg's `error` about the database at `url` as one of ours, its password hidden wherever it shows."""
    from traces import backends

    found = backends.translate(redact(url), error)
    hidden = hide(str(found), url)
    return found if hidden == str(found) else type(found)(hidden)
