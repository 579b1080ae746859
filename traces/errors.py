"""Errors of the trace store. Each `str()` is a one-paragraph user message naming the file (or the database URL,
its password hidden) and what was expected; the CLI maps every `TraceStoreError` to exit code 2. `translate`
turns SQLite's own errors (by result code, e.g. SQLITE_NOTADB, SQLITE_CORRUPT, SQLITE_READONLY_DIRECTORY,
SQLITE_FULL) into these, `translate_postgres` PostgreSQL's (by SQLSTATE, e.g. 53100 disk full, 25006 read-only
transaction, 28P01 wrong password, XX001 damaged data). Neither imports a driver: they read the error's codes."""

from __future__ import annotations

import os
import re
import sqlite3


class TraceStoreError(Exception):
    """Base class: the trace database cannot be used as asked."""


class CorruptDatabaseError(TraceStoreError):
    """The file is not an SQLite database, or its pages are damaged."""


class SchemaVersionError(TraceStoreError):
    """The database was written by a newer version of portfolio-planner (a schema this code does not know)."""


class DatabaseLockedError(TraceStoreError):
    """Other writers held the database lock for longer than every retry allowed."""


class StoreUnavailableError(TraceStoreError):
    """The PostgreSQL server cannot be reached (down, restarting, refusing connections) after every retry; the
    next operation connects again, so a store outlives a server restart."""


class ReadOnlyDatabaseError(TraceStoreError):
    """The database file, or the directory SQLite must create its -wal and -shm files in, is not writable."""


class DiskFullError(TraceStoreError):
    """A write failed for want of space (a full disk or a file-size limit); the transaction was rolled back."""


class BadRowError(TraceStoreError, ValueError):
    """A stored row this release cannot read (hand-edited, damaged, nested deeper than a parser follows): its
    message names the file, the table, the row and, where it is one column, the column."""


class StepConflictError(TraceStoreError, ValueError):
    """Steps whose `(run_id, step)` is already recorded with other content, in a batch that had to land whole
    (`import_jsonl(strict=True)`); nothing of it was written. `conflicts` are `traces.recording.StepConflict`s."""

    def __init__(self, path: str, conflicts: list) -> None:
        self.path = path
        self.conflicts = conflicts
        shown = "; ".join(str(c) for c in conflicts[:5])
        more = f" (and {len(conflicts) - 5} more)" if len(conflicts) > 5 else ""
        super().__init__(f"{path}: {len(conflicts)} conflicting step(s), nothing written: {shown}{more}")


class IdempotencyKeyReused(TraceStoreError, ValueError):
    """A batch of steps under an idempotency key that an earlier batch with other steps already used: nothing of
    it was written. The key is not repeated in the message (the caller knows it; a server may have qualified it)."""

    def __init__(self, path: str, created: str) -> None:
        self.path = path
        self.created = created
        super().__init__(
            f"this idempotency key was first used at {created} for a batch with other steps; nothing was recorded. "
            "A retry must send the same steps under the same key: give new steps a new key."
        )


class TraceImportError(TraceStoreError, ValueError):
    """A JSONL trace file with bad lines; `problems` lists `(line number, message)` pairs."""

    def __init__(self, path: str, problems: list[tuple[int, str]], *, imported: int = 0) -> None:
        self.path = path
        self.problems = problems
        self.imported = imported
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if [line for line, _ in self.problems] == [0]:  # the file as a whole (unreadable, not text): no line read
            return f"{self.path}: {self.problems[0][1]}; nothing imported."
        shown = "; ".join(f"{self.path}:{line}: {msg}" for line, msg in self.problems[:5])
        more = f" (and {len(self.problems) - 5} more bad lines)" if len(self.problems) > 5 else ""
        conflicts = sum(1 for _, msg in self.problems if "is already recorded with a different" in msg)
        hint = (
            ('Each line must be one JSON object with run_id, step, action, args and outcome ("success" or "failure").')
            if conflicts < len(self.problems)
            else ("Give a new step a step number of its own, or leave the line out.")
        )
        return (
            f"{len(self.problems)} bad line(s) in {self.path}, {self.imported} step(s) imported: {shown}{more}. " + hint
        )


def _error_name(error: sqlite3.Error) -> str:
    return getattr(error, "sqlite_errorname", None) or ""


def translate(path: str, error: sqlite3.Error) -> TraceStoreError:
    """SQLite's own error about the file at `path` as one of ours. The file itself is never opened to find out
    (see `traces.connection`): SQLite's result code says what is wrong, a stat of the directory says why."""
    name, text = _error_name(error), str(error)
    if name == "SQLITE_NOTADB" or "not a database" in text:
        return CorruptDatabaseError(
            f"{path}: not an SQLite database (SQLite says: {text}). Expected a portfolio-planner trace "
            "database: pass another --traces path, or move this file away to start a new one."
        )
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        return CorruptDatabaseError(
            f"{path}: the SQLite database is damaged ({text}). Expected a readable portfolio-planner trace "
            "database: restore a backup or move the file away (the .db-wal file beside it belongs to it)."
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return ReadOnlyDatabaseError(
            f"{path}: the trace database is read-only ({text}; {name or 'SQLITE_READONLY'}). The store must write "
            "the file and create its -wal and -shm files beside it: make the file and its directory writable, "
            "or pass another --traces path."
        )
    if name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
        return _cannot_open(path, text)
    if name == "SQLITE_FULL" or name == "SQLITE_IOERR_WRITE" or "disk is full" in text:
        return DiskFullError(
            f"{path}: a write failed ({text}; {name}): the disk is full, a file-size limit was reached or the "
            "device failed. The transaction was rolled back and nothing committed before it is lost: free some "
            "space and retry."
        )
    return TraceStoreError(f"{path}: SQLite error: {text}.")


def _cannot_open(path: str, text: str) -> TraceStoreError:
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return CorruptDatabaseError(f"{path}: is a directory; expected an SQLite trace database file.")
    if not os.path.isdir(folder):
        return TraceStoreError(f"{path}: cannot open ({text}): the directory {folder} does not exist.")
    if not os.access(folder, os.W_OK | os.X_OK):
        return ReadOnlyDatabaseError(
            f"{path}: cannot open ({text}): the directory {folder} is not writable, and SQLite must create the "
            "database and its -wal and -shm files there. Make it writable or pass another --traces path."
        )
    return TraceStoreError(f"{path}: cannot open the trace database ({text}).")


# SQLSTATE -> (error class, what the user can do); the first two characters name a class of conditions
_POSTGRES_CODES: dict[str, tuple[type[TraceStoreError], str]] = {
    "53100": (DiskFullError, "the server's disk is full: free some space there and retry"),
    "53200": (TraceStoreError, "the server ran out of memory: retry, or give it more"),
    "25006": (ReadOnlyDatabaseError, "the server accepts no writes (a standby, or default_transaction_read_only)"),
    "42501": (ReadOnlyDatabaseError, "the user lacks a privilege the trace store needs (CREATE, INSERT, UPDATE)"),
    "28P01": (TraceStoreError, "the password was refused: give it in the URL, PGPASSWORD or ~/.pgpass"),
    "28000": (TraceStoreError, "the server refused this user (pg_hba.conf)"),
    "3D000": (TraceStoreError, "there is no such database: create it first (createdb NAME)"),
    "XX001": (CorruptDatabaseError, "the server found damaged data pages: restore a backup"),
    "XX002": (CorruptDatabaseError, "the server found a damaged index: REINDEX it or restore a backup"),
}


# libpq reports a refused connection as text alone (psycopg's OperationalError carries no SQLSTATE then): the
# server's FATAL messages that are not "the server is away", by the SQLSTATE they stand for
_REFUSALS = (
    (re.compile(r'database "[^"]*" does not exist'), "3D000"),
    (re.compile(r"password authentication failed|no password supplied"), "28P01"),
    (re.compile(r'no pg_hba\.conf entry|role "[^"]*" does not exist'), "28000"),
    (re.compile(r"permission denied for database"), "42501"),
)


def postgres_code(error: BaseException) -> str:
    """The SQLSTATE of a psycopg error, read from libpq's message for a refused connection; "" when unknown."""
    code = getattr(error, "sqlstate", None)
    if code:
        return str(code)
    text = str(error)
    return next((found for pattern, found in _REFUSALS if pattern.search(text)), "")


def _is_connection_error(error: Exception) -> bool:
    """psycopg's OperationalError or InterfaceError (a connection failed, broke or was closed), looked up in the
    loaded module: this module imports no driver."""
    import sys

    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


def translate_postgres(target: str, error: Exception) -> TraceStoreError:
    """PostgreSQL's error (a psycopg exception, by its SQLSTATE) about the database at `target` (already
    redacted) as one of ours; a connection that failed or broke is `StoreUnavailableError`."""
    code = postgres_code(error)
    text = " ".join(str(error).split())
    known = _POSTGRES_CODES.get(code)
    if known is not None:
        kind, advice = known
        return kind(f"{target}: {advice} (PostgreSQL says: {text}).")
    if _is_connection_error(error) and (not code or code.startswith("08") or code in ("57P01", "57P02", "57P03")):
        return StoreUnavailableError(
            f"{target}: cannot reach the PostgreSQL server ({text or type(error).__name__}). Expected a running "
            "server at that URL: start it, or check the host, port and user (libpq's PGHOST, PGPORT, PGUSER and "
            "~/.pgpass apply)."
        )
    return TraceStoreError(f"{target}: PostgreSQL error {code}: {text}.")
