"""Whether the service's trace store can be read and written, for `/v1/health`; and the store's location kept out
of everything a client reads.

Every route that touches the store fails while it is full or damaged, and `/v1/health` is what a load balancer or
an operator looks at, so it says `degraded`, with the reason, from three sources:

- a probe (`probe`), run by the service's watch loop about once a second, never by the health route, which
  answers from the last one at once: the newest row of every table is read (each b-tree's path from its root to
  its last leaf, and the schema: damaged pages there, or a file that is not a database, fail it), the
  file's page count is held against its page limit with no free page left (`PRAGMA max_page_count`: the next
  write that needs a page fails with SQLITE_FULL), and the file system it is on must have `MIN_FREE_BYTES`
  free. Reads only: the probe takes no write lock, so it neither waits for a writer nor holds one up.
- what the store's users met (`failed`, `wrote`): a write that failed for want of space or because the file is
  read-only (the service's own writes, or a planner worker's recording of a plan) is reported until a write
  succeeds again; damage (SQLITE_CORRUPT, "not a database") until the server restarts, since pages do not heal
  and the file must not be replaced under a running server (`traces.connection`): restore a backup, restart.
- where the store is (`opened`, then each probe): a SQLite file moved or deleted, or replaced by another file,
  under a running server is still open in it, so its writes would land in a file no other server (nor the next
  start) sees. While the path does not lead to the file the server opened, or cannot be reached (a directory
  made unreadable), health says so and every request that needs the store is refused with a 503
  `StoreUnreachableError` (`unreachable`), a step never acknowledged into the lost file; when the file is back
  where it was, the next probe finds it and the server serves again on its own. A replaced file is not adopted:
  the server's connection is to the old one (`traces.connection`), so restart it to use the new file.

A store that is no file (a PostgreSQL URL) has no location to check. On PostgreSQL the probe reads the schema
version and one row of every trace table, and asks the server whether it accepts writes (`transaction_read_only`:
a standby does not), with one retry only (a broken connection is opened again first), so that it answers within
its second; the server watches its own disk, and a full one fails a write with SQLSTATE 53100, which `failed`
reports like SQLite's SQLITE_FULL. A server that cannot be reached (`StoreUnavailableError`, found by the probe
or met by a request) is one of the `UNREACHABLE_KINDS`: requests that need the store are refused with a 503 and
Retry-After, and the next probe that reaches the server again (the store's connection opened anew) clears it,
so the replica serves again on its own.

Reasons never name the file: `/v1/health` needs no token. `StorePaths.hide` takes the store's path (as given,
absolute and resolved, with its -wal and -shm files, and its directory) out of any text a client reads: error
bodies, job errors, MCP tool errors, health reasons; for a PostgreSQL store its URL (as given, with its password
hidden or left out), the password wherever it shows, and the server's address as libpq names it in its errors
(`server at "HOST", port N`, `server on socket "PATH"`). The full text is logged on the server.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading

from traces import errors
from traces.backends import POSTGRES
from traces.connection import is_private
from traces.targets import hide, is_url, redact, split_password

log = logging.getLogger(__name__)

MIN_FREE_BYTES = 1 << 20  # less than this left, and the next WAL frames or checkpoint may not fit
WRITE_KINDS = ("DiskFullError", "ReadOnlyDatabaseError")
DAMAGE_KINDS = ("CorruptDatabaseError",)
# the store cannot be reached: the server refuses what needs it (503) until a probe finds it again
UNREACHABLE_KINDS = ("StoreMissing", "StoreReplaced", "StoreUnreachable", "StoreUnavailableError")
PROBE_RETRIES = 1  # on PostgreSQL: one more try, on a connection opened anew (the server may have restarted)
REASONS = {
    "DiskFullError": (
        "the trace store cannot be written: its disk is full or a size limit was reached (plans without a run id "
        "are still answered; steps, retrains and plans under a run id fail until there is space)"
    ),
    "ReadOnlyDatabaseError": (
        "the trace store cannot be written: it is read-only (plans without a run id are still answered; steps, "
        "retrains and plans under a run id fail)"
    ),
    "StoreMissing": (
        "the trace store cannot be reached: its file is no longer where the server opened it (moved or deleted); "
        "steps, retrains, replans and plans under a run id are refused (503) until it is back"
    ),
    "StoreReplaced": (
        "the trace store cannot be reached: another file took its place under the server; steps, retrains, "
        "replans and plans under a run id are refused (503) until the file the server opened is back (or restart "
        "the server to use the new one)"
    ),
    "StoreUnreachable": (
        "the trace store cannot be reached (the path to its file cannot be followed: a directory made unreadable "
        "or replaced); steps, retrains, replans and plans under a run id are refused (503) until it can"
    ),
    "CorruptDatabaseError": (
        "the trace store is damaged (SQLite found pages it cannot read): restore a backup, then restart the server"
    ),
    "StoreUnavailableError": (
        "the trace store cannot be reached: its PostgreSQL server does not answer (down or restarting); steps, "
        "retrains, replans and plans under a run id are refused (503) until it is back (plans without a run id "
        "are still answered)"
    ),
}


def reason(kind: str) -> str:
    """The health reason for a store error of type `kind`: what is wrong and what still works, never where."""
    return REASONS.get(kind, f"the trace store cannot be used ({kind})")


class StoreUnreachableError(errors.TraceStoreError):
    """A request that needs the store while it cannot be reached (`StoreHealth.unreachable`): answered 503."""


def store_error(kind: str, message: str) -> errors.TraceStoreError:
    """The `traces.errors` exception named `kind` (a `TraceStoreError` if there is none), for an error a planner
    worker met on its own connection and reported by name."""
    found = getattr(errors, kind, None)
    if isinstance(found, type) and issubclass(found, errors.TraceStoreError):
        return found(message)
    return errors.TraceStoreError(message)


class StoreHealth:
    """The store's health as the probe and the store's users found it (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._probed: str | None = None  # the last probe's finding: an error kind, None when it found nothing
        self._write_failure: str | None = None  # kind of the last failed write, until a write succeeds
        self._damage: str | None = None  # kind of damage met, until the server restarts
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file the server opened

    def opened(self, path: str) -> None:
        """Note which file the store at `path` is (its device and inode, by `os.stat`: never an open), for the
        probe to check that the path still leads to it; nothing for a store that is no file."""
        if is_private(path):
            return
        try:
            found = os.stat(path)
        except (OSError, ValueError):  # no file there: a URL
            return
        self._identity = (found.st_dev, found.st_ino)

    def probe(self, store) -> None:
        """Read the store as the module docstring says and keep what was found. Call holding the service's store
        lock, off the event loop."""
        try:
            found = _located(store.path, self._identity) or _probe(store)
        except errors.DatabaseLockedError:
            return  # busy is not broken: keep the last finding
        except errors.TraceStoreError as error:
            found = type(error).__name__
            log.warning("trace store probe: %s", error)
        with self._lock:
            self._probed = found
            if found in DAMAGE_KINDS:
                self._damage = found

    def failed(self, error: BaseException | str) -> None:
        """A store user met `error` (or an error of that type name, from a worker)."""
        kind = error if isinstance(error, str) else type(error).__name__
        with self._lock:
            if kind in UNREACHABLE_KINDS:  # refused from now on, until the next probe reaches the store
                self._probed = kind
            elif kind in WRITE_KINDS:
                self._write_failure = kind
            elif kind in DAMAGE_KINDS:
                self._damage = kind

    def wrote(self) -> None:
        """A write to the store succeeded: writes are possible again."""
        with self._lock:
            self._write_failure = None

    def unreachable(self) -> str | None:
        """The reason the store cannot be reached, as last probed (`UNREACHABLE_KINDS`); None when it can."""
        with self._lock:
            kind = self._probed
        return reason(kind) if kind in UNREACHABLE_KINDS else None

    def reasons(self) -> list[str]:
        """Why the store is unusable, most serious first; empty when it is fine."""
        with self._lock:
            kinds = [self._damage, self._probed, self._write_failure]
        return list(dict.fromkeys(reason(kind) for kind in kinds if kind is not None))


def _located(path: str, identity: tuple[int, int] | None) -> str | None:
    """The kind ("StoreMissing", "StoreReplaced" or "StoreUnreachable") when `path` no longer leads to the file whose
    (device, inode) is `identity`; None when it does, or when there is no file to check (`identity` None)."""
    if identity is None:
        return None
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return "StoreMissing"
    except OSError:
        return "StoreUnreachable"
    return None if (found.st_dev, found.st_ino) == identity else "StoreReplaced"


def _probe(store) -> str | None:
    """The error kind the store's state means (`REASONS`), or None; raises the store's own errors on reads."""
    if store.backend is POSTGRES:
        return _probe_postgres(store)
    tables = store._retry(lambda: store.db.table_names())
    for table in tables:
        if not table.startswith("sqlite_"):
            store._retry(lambda: store.db.execute(f'SELECT max(rowid) FROM "{table}"').fetchone())

    def pages() -> tuple[int, int, int]:
        return tuple(
            store.db.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("page_count", "freelist_count", "max_page_count")
        )

    count, free, limit = store._retry(pages)
    if count >= limit and free == 0:
        return "DiskFullError"
    if is_private(store.path):
        return None
    folder = os.path.dirname(os.path.abspath(store.path))
    if shutil.disk_usage(folder).free < MIN_FREE_BYTES:
        return "DiskFullError"
    if not (os.access(store.path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)):
        return "ReadOnlyDatabaseError"
    return None


def _probe_postgres(store) -> str | None:
    """`_probe` on PostgreSQL: the schema version, a row of every table read, and whether the server takes
    writes; each with `PROBE_RETRIES` (module docstring)."""

    def look() -> str:
        store.backend.read_version(store.db)
        for table in store.db.table_names():
            store.db.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone()
        return store.db.execute("SHOW transaction_read_only").fetchone()[0]

    read_only = store._retry(look, retries=PROBE_RETRIES)
    return "ReadOnlyDatabaseError" if read_only == "on" else None


# where libpq says it tried to connect: `server at "db" (10.0.0.5), port 5432`, `server on socket "/run/..."`
_LIBPQ_SERVER = re.compile(r'server (?:at "[^"]*"(?: \([^)]*\))?, port \d+|on socket "[^"]*")')


class StorePaths:
    """Takes the trace store's location out of text a client reads (module docstring)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._pattern: re.Pattern[str] | None = None
        self._url: str | None = None
        if path is None or is_private(os.fspath(path)):
            return
        text = os.fspath(path)
        if is_url(text):  # the URL as given, as the store shows it (password hidden) and without its password
            self._url = text
            self._names = {name: "the trace store" for name in {text, redact(text), split_password(text)[0]}}
            alternatives = "|".join(re.escape(name) for name in sorted(self._names, key=len, reverse=True))
            self._pattern = re.compile(f"({alternatives})")
            return
        files = {text, os.path.abspath(text), os.path.realpath(text)}
        files |= {f"{name}{suffix}" for name in files for suffix in ("-wal", "-shm", "-journal")}
        folders = {os.path.dirname(os.path.abspath(text)), os.path.dirname(os.path.realpath(text))}
        self._names = {name: "the trace store" for name in files}
        self._names.update({name: "the trace store's directory" for name in folders if len(name) > 1})
        alternatives = "|".join(re.escape(name) for name in sorted(self._names, key=len, reverse=True))
        # a whole path only: not preceded by a path character, nor followed by one (a sentence's full stop is fine)
        self._pattern = re.compile(rf"(?<![\w./-])({alternatives})(?![\w-]|\.\w)")

    def hide(self, text: str) -> str:
        """`text` with every spelling of the store's path (and its directory) replaced by words."""
        if self._pattern is None:
            return text
        text = self._pattern.sub(lambda match: self._names[match[1]], text)
        if self._url is None:
            return text
        return _LIBPQ_SERVER.sub("the trace store's server", hide(text, self._url))
