"""`TraceStore`: one SQLite file (through sqlite-utils), or one PostgreSQL database (through psycopg), holding
runs, plans, executed steps and learned models. `TraceStore("traces.db")` opens a file, `TraceStore(
"postgresql://user@host/db")` a database (`traces.targets`); the methods are the same, the SQL one text for both
with the differences in `traces.backends`, and one schema with one migration path (`traces.schema`).

Several processes may write at once: the file is in WAL mode, every write is one `BEGIN IMMEDIATE` transaction
(so a writer takes the lock before reading anything and never deadlocks on a lock upgrade), SQLite's
busy_timeout waits for the lock, and on top of that a write that still finds the database locked is rolled back
and retried with exponential backoff and jitter. A batch is one transaction: it lands whole or not at all, even
if the process is killed half-way (tests/test_store_faults.py kills writers at 100 random points).

Inside a process every store on a file shares one connection (`traces.connection`, which also explains why
nothing but SQLite may open the file), and several threads may use it: each operation, and each transaction
from BEGIN to COMMIT, holds the connection's lock, so only the transaction a call began is ever rolled back.
The retries and transactions live in `traces.transactions` (`Transactions`, which `TraceStore` extends). Reading
steps goes by keyset pages (`id > last ORDER BY id LIMIT n`), so no statement stays open between
chunks while other threads write.

On PostgreSQL the same holds with the server's locks: each write transaction takes one advisory lock of the
database first (as BEGIN IMMEDIATE takes the file's), serialisation failures and deadlocks are retried, and a
connection the server dropped is opened again by the next attempt (`traces.transactions`).

Bad files are recognised from SQLite's own errors, never by reading the file: "file is not a database",
"malformed", "readonly" (`traces.errors.translate`). They are refused on open with `CorruptDatabaseError`,
`ReadOnlyDatabaseError` or `SchemaVersionError`, before anything is written; a read-only file, which SQLite
would open read-only without a word, is found by a write probe rolled back on first open (one write lock, no
data written).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import uuid
import weakref
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlite_utils

from traces import backends, connection, recording, schema
from traces.errors import CorruptDatabaseError, StepConflictError, TraceStoreError
from traces.recording import RecordReport
from traces.records import ActionStats, RunRecord, StepRecord, StoredModel
from traces.rows import STEP_COLUMNS, row_step, step_row
from traces.stored_json import LIST, OBJECT, read_json, row_name
from traces.targets import is_url, redact
from traces.tenants import DEFAULT_TENANT, step_filter
from traces.transactions import Transactions
from traces.versions import latest_version, next_version

log = logging.getLogger(__name__)

ENV_VAR = "PORTFOLIO_TRACES"
DEFAULT_PATH = "traces.db"
TABLES = (
    "runs", "plans", "steps", "models", "selection_models", "task_sources", "run_tasks", "run_plans", "step_batches",
)  # fmt: skip


def default_path() -> str:
    """`$PORTFOLIO_TRACES`, else `./traces.db` (a path or a PostgreSQL URL)."""
    return os.environ.get(ENV_VAR) or DEFAULT_PATH


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _step_where(action: str | None, tenant: str | None, through: int | None) -> tuple[str, list[Any]]:
    """The SQL condition (and parameters) on `steps` of `count_steps` and `iter_step_chunks`."""
    where: list[str] = ["1 = 1"]
    params: list[Any] = []
    if action is not None:
        where.append("action = ?")
        params.append(action)
    if tenant is not None:
        condition, values = step_filter(tenant)
        where.append(condition)
        params += values
    if through is not None:
        where.append("id <= ?")
        params.append(through)
    return " AND ".join(where), params


class TraceStore(Transactions):
    """The trace database at `path` (default: `$PORTFOLIO_TRACES`, else `./traces.db`), created on first use; a
    `postgresql://` or `postgres://` URL names a PostgreSQL database instead (it must exist; the tables are
    created on first use), and `path` is then the URL with its password hidden.

    `busy_timeout_ms` is how long SQLite (or PostgreSQL, as its lock_timeout) itself waits for another writer;
    `retries` more attempts follow, with backoff doubling from `backoff_s` (capped at 2 s), before a write gives
    up with `DatabaseLockedError` (or, when the PostgreSQL server stays away, `StoreUnavailableError`).
    Every store on one database in one process shares a single connection (`traces.connection`); a store may be
    used from several threads. `db` is that connection wrapped by sqlite-utils (on PostgreSQL by
    `traces.backends.PostgresDatabase`, the same `execute`, `query`, `table_names` and `conn`, `?` placeholders),
    for reading in tests and tools: use it from one thread, outside the store's own calls. `backend` says which.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_ms: int = 5000,
        retries: int = 10,
        backoff_s: float = 0.02,
    ) -> None:
        target = os.fspath(path) if path is not None else default_path()
        self.busy_timeout_ms = busy_timeout_ms
        self.retries = retries
        self.backoff_s = backoff_s
        self._url: str | None = target if is_url(target) else None
        self.backend: backends.Backend = backends.SQLITE if self._url is None else backends.POSTGRES
        self.path = redact(target)
        try:
            self._shared: connection.SharedConnection | None = self._acquire(target)
        except backends.driver_errors() as error:
            raise self._translate(error) from error
        self._release = weakref.finalize(self, connection.release, self._shared)  # also if never closed
        self.db: Any = (
            sqlite_utils.Database(self._shared.conn, execute_plugins=False)
            if self._url is None
            else backends.PostgresDatabase(self._shared)
        )
        try:
            self._open_schema()
        except BaseException:
            self.close()
            raise

    # -- opening -------------------------------------------------------------------------------------------------

    def _acquire(self, target: str) -> connection.SharedConnection:
        """The process's connection to `target`; for a URL, retried like any operation while the server is away
        (a service may start before its database), then `StoreUnavailableError`."""
        if self._url is None:
            return connection.acquire(target, self._connect)
        delay = self.backoff_s
        timeout_s = max(1.0, self.busy_timeout_ms / 1000.0)
        # kept by the shared connection to reconnect: a function of the URL alone, never bound to this store (the
        # registry would keep an unclosed store alive, and its connection with it)
        connect = functools.partial(backends.connect_postgres, connect_timeout_s=timeout_s)
        for attempt in range(self.retries + 1):
            try:
                return connection.acquire(target, connect)
            except backends.driver_errors() as error:
                if not backends.is_disconnected(error) or attempt == self.retries:
                    raise
                delay = self._pause(delay)
        raise AssertionError("unreachable")

    def _connect(self, path: str) -> sqlite3.Connection:
        # isolation_level=None: the driver never opens a transaction behind our back; `_write` owns BEGIN/COMMIT.
        return sqlite3.connect(
            path, timeout=self.busy_timeout_ms / 1000.0, check_same_thread=False, isolation_level=None
        )

    def _open_schema(self) -> None:
        """Check (first user: set up, migrate and probe) the database. Bad files surface here, as SQLite's own
        errors: "file is not a database", "malformed", "readonly" (see `_translate`)."""
        shared = self._shared
        assert shared is not None
        first = not shared.checked
        if first and self.backend is backends.SQLITE:
            self._retry(lambda: self.db.execute("PRAGMA journal_mode = wal"))
            self._retry(lambda: self.db.execute("PRAGMA synchronous = NORMAL"))  # WAL: a crash loses no commit
        version = self._retry(lambda: schema.check_version(self.db, self.path))
        if version < schema.SCHEMA_VERSION:
            self._write(self._migrate_locked)
        elif first:
            self._probe_writable(version)
        existing = set(self._retry(lambda: self.db.table_names()))
        missing = [t for t in TABLES if t not in existing]
        if missing:
            raise CorruptDatabaseError(
                f"{self.path}: {self.backend.database} without the trace tables {', '.join(missing)} (expected a "
                f"portfolio-planner trace database with tables {', '.join(TABLES)})."
            )
        shared.checked = True

    def _probe_writable(self, version: int) -> None:
        """Refuse a read-only file on open rather than at the first lost batch: SQLite opens such a file
        read-only without a word. Rewriting the schema version in a transaction that is rolled back writes
        nothing (on PostgreSQL it finds a read-only server or a user without the privilege)."""
        self._write(lambda: self.backend.write_version(self.db, version), commit=False)

    def _migrate_locked(self) -> None:
        version = schema.check_version(self.db, self.path)  # re-read under the lock: another process may have won
        if version == 0:
            foreign = [t for t in self.db.table_names() if t not in TABLES and t != "schema_version"]
            if foreign:
                raise CorruptDatabaseError(
                    f"{self.path}: {self.backend.database} of something else (tables {', '.join(foreign[:5])}); "
                    f"expected {self.backend.empty} or a portfolio-planner trace database."
                )
        new = schema.migrate(self.db, self.path)
        if new != version:
            log.info("trace store %s migrated from schema %d to %d", self.path, version, new)

    # -- runs and plans ------------------------------------------------------------------------------------------

    def start_run(
        self, fingerprint: str | None, goal: str | None, *, run_id: str | None = None, domain: str | None = None
    ) -> str:
        """Record the start of one execution of a task (`domain`: its domain's fingerprint, what configuration
        selection groups runs by); returns its run id (a fresh hex id unless given)."""
        run_id = run_id or uuid.uuid4().hex
        sql = (
            "INSERT INTO runs (id, fingerprint, goal, started, ended, outcome, domain) VALUES (?, ?, ?, ?, NULL, "
            "NULL, ?) ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, goal = excluded.goal, "
            "started = excluded.started, ended = NULL, outcome = NULL, domain = excluded.domain"
        )
        self._write(lambda: self.db.execute(sql, [run_id, fingerprint, goal, _now(), domain]))
        return run_id

    def end_run(self, run_id: str, outcome: str) -> None:
        """Mark a run finished with `outcome` (e.g. "success", "failure", "abandoned")."""

        def body() -> int:
            cursor = self.db.execute("UPDATE runs SET ended = ?, outcome = ? WHERE id = ?", [_now(), outcome, run_id])
            return cursor.rowcount

        if self._write(body) == 0:
            raise TraceStoreError(f"{self.path}: no run with id {run_id!r} (start it with start_run first).")

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._retry(lambda: list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id])))
        return RunRecord(**rows[0]) if rows else None

    def record_plan(
        self, run_id: str, delegate: str | None, attempts: Iterable[Any], latency_ms: float, plan: Iterable[Any]
    ) -> int:
        """Record the plan a delegate returned for a run. `attempts` may be pydantic models (portfolio's
        `Attempt`) or dicts; `plan` grounded actions or their PDDL strings. Returns the row id."""
        attempts_json = [a.model_dump(mode="json") if hasattr(a, "model_dump") else a for a in attempts]
        values = [
            run_id, delegate, json.dumps(attempts_json, default=str), float(latency_ms),
            json.dumps([str(step) for step in plan]), _now(),
        ]  # fmt: skip
        sql = (
            "INSERT INTO plans (run_id, delegate, attempts, latency_ms, plan, recorded) VALUES (?, ?, ?, ?, ?, ?) "
            "RETURNING id"
        )
        return self._write(lambda: int(self.db.execute(sql, values).fetchone()[0]))

    def plans(self, run_id: str) -> list[dict[str, Any]]:
        """The plans recorded for a run, oldest first; `BadRowError` names a row whose JSON cannot be read."""
        rows = self._retry(lambda: list(self.db.query("SELECT * FROM plans WHERE run_id = ? ORDER BY id", [run_id])))
        for row in rows:
            for column in ("attempts", "plan"):
                where = row_name(self.path, "plans", f"id {row['id']}", column)
                row[column] = read_json(LIST, row[column], where, empty="[]")
        return rows

    # -- steps -----------------------------------------------------------------------------------------------------

    def record_steps(
        self,
        records: Iterable[StepRecord],
        *,
        all_or_nothing: bool = False,
        log_conflicts: bool = True,
        idempotency_key: str | None = None,
        provenance: tuple[str, str] | None = None,
    ) -> RecordReport:
        """Record steps in one transaction, idempotently (`traces.recording`): the report counts the new and the
        skipped ones and lists the conflicts (not written; logged unless `log_conflicts=False`); with
        `all_or_nothing`, a conflict is `StepConflictError` and nothing is written. `idempotency_key`: the same
        batch under a used key writes nothing and returns the first call's report; other steps under it are
        `IdempotencyKeyReused`. `provenance`: the (tenant, principal) that posted them (`traces.provenance`),
        kept for every step not in conflict in the same transaction, so no crash leaves steps without it."""
        return self._record_rows(
            [step_row(r) for r in records],
            all_or_nothing=all_or_nothing,
            log_conflicts=log_conflicts,
            idempotency_key=idempotency_key,
            provenance=provenance,
        )

    def _record_rows(
        self,
        rows: list[tuple],
        *,
        all_or_nothing: bool = False,
        log_conflicts: bool = True,
        idempotency_key: str | None = None,
        provenance: tuple[str, str] | None = None,
    ) -> RecordReport:
        if not rows and idempotency_key is None:
            return RecordReport()
        fingerprint = recording.batch_fingerprint(rows) if idempotency_key is not None else ""

        def body() -> RecordReport:  # looked up under the write lock: no writer can add these steps meanwhile
            conn = self.db.conn
            if idempotency_key is not None:
                answered = recording.answered_batch(conn, self.path, idempotency_key, fingerprint)
                if answered is not None:
                    return answered
            keys = list(dict.fromkeys((row[0], row[1]) for row in rows))
            fresh, report = recording.classify(rows, recording.existing_rows(conn, keys, self.backend))
            if report.conflicts and all_or_nothing:
                raise StepConflictError(self.path, report.conflicts)
            self.backend.insert_rows(conn, "steps", STEP_COLUMNS, fresh)
            if provenance is not None:
                refused = {conflict.index for conflict in report.conflicts}
                posted = [(row[0], row[1]) for i, row in enumerate(rows) if i not in refused]
                recording.keep_provenance(self.db, self.backend, posted, *provenance)
            if idempotency_key is not None:
                recording.keep_batch(conn, idempotency_key, fingerprint, report)
            return report

        report = self._write(body)
        if log_conflicts:
            recording.log_conflicts(self.path, report)
        return report

    def count_steps(self, action: str | None = None, *, tenant: str | None = None, through: int | None = None) -> int:
        """The steps recorded (of one action name; of one tenant's runs, `traces.tenants`; up to step id
        `through`, when given)."""
        where, params = _step_where(action, tenant, through)
        sql = f"SELECT count(*) FROM steps WHERE {where}"
        return self._retry(lambda: self.db.execute(sql, params).fetchone()[0])

    def last_step_id(self) -> int:
        """The id of the newest step (0 before the first): what a model fit now has seen (`iter_step_chunks`'
        `through`)."""
        return self._retry(lambda: self.db.execute("SELECT coalesce(max(id), 0) FROM steps").fetchone()[0])

    def iter_step_chunks(
        self,
        columns: Sequence[str] = STEP_COLUMNS,
        *,
        action: str | None = None,
        chunk_size: int = 50_000,
        tenant: str | None = None,
        through: int | None = None,
    ) -> Iterator[list[tuple]]:
        """Raw step rows (tuples of `columns`, in insertion order) in chunks: the fast path for learners that
        read millions of steps. JSON columns stay JSON text. Only the steps of one action name, of one tenant's
        runs (`traces.tenants`) and up to step id `through`, when given."""
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
        unknown = [c for c in columns if c not in STEP_COLUMNS and c != "id"]
        if unknown:
            raise ValueError(f"unknown step columns {unknown}; expected some of id, {', '.join(STEP_COLUMNS)}")
        # Keyset pages, each its own short query: no statement stays open between chunks (another thread may
        # write on the shared connection meanwhile, and an open read would hold back WAL checkpoints), and the
        # upper bound `last` fixes the set of steps at the call, as one long SELECT did. Each page's last id
        # comes from an OFFSET probe on the primary key, not from an extra column on every row: measured on
        # 300,000 steps, 5-10% slower than one long SELECT where an id column sliced off in Python was 35%.
        last = self.last_step_id() if through is None else through
        selected, extra = _step_where(action, tenant, None)
        where = f"id > ? AND id <= ? AND {selected}"
        bound_sql = f"SELECT id FROM steps WHERE {where} ORDER BY id LIMIT 1 OFFSET ?"
        page_sql = f"SELECT {', '.join(columns)} FROM steps WHERE {where} ORDER BY id"
        after = 0
        while after < last:

            def page() -> tuple[int, list[tuple]]:
                found = self.db.conn.execute(bound_sql, [after, last, *extra, chunk_size - 1]).fetchone()
                bound = found[0] if found else last
                return bound, self.db.conn.execute(page_sql, [after, bound, *extra]).fetchall()

            after, rows = self._retry(page)
            if rows:
                yield rows

    def iter_steps(self, action: str | None = None) -> Iterator[StepRecord]:
        """Every recorded step (of one action name, if given) in insertion order."""
        for chunk in self.iter_step_chunks(STEP_COLUMNS, action=action):
            for row in chunk:
                yield row_step(row)

    def stats(self, *, run_prefix: str | None = None, exclude_prefix: str | None = None) -> list[ActionStats]:
        """Per action name: steps, failures, failure rate and mean duration (of all steps, of successes, of
        failures), sorted by name. Only the steps of runs whose id starts with `run_prefix`, and none of runs
        whose id starts with `exclude_prefix`, when given (the service's tenants, `portfolio.serve.tenancy`)."""
        where, params = [], []
        if run_prefix is not None:
            where.append("substr(run_id, 1, ?) = ?")
            params += [len(run_prefix), run_prefix]
        if exclude_prefix is not None:
            where.append("substr(run_id, 1, ?) != ?")
            params += [len(exclude_prefix), exclude_prefix]
        sql = (
            "SELECT action, count(*) AS steps, sum(CASE WHEN outcome = 'failure' THEN 1 ELSE 0 END) AS failures, "
            "avg(duration_ms) AS mean, "
            "avg(CASE WHEN outcome = 'success' THEN duration_ms END), "
            "avg(CASE WHEN outcome = 'failure' THEN duration_ms END) FROM steps "
            f"{'WHERE ' + ' AND '.join(where) if where else ''} GROUP BY action ORDER BY action"
        )
        rows = self._retry(lambda: self.db.execute(sql, params).fetchall())
        return [
            ActionStats(
                action=a,
                steps=n,
                failures=f,
                failure_rate=f / n if n else 0.0,
                mean_duration_ms=None if m is None else round(m, 3),
                mean_success_ms=None if ms is None else round(ms, 3),
                mean_failure_ms=None if mf is None else round(mf, 3),
            )  # fmt: skip
            for a, n, f, m, ms, mf in rows
        ]

    # -- models ----------------------------------------------------------------------------------------------------

    def save_model(
        self, blob: bytes, metadata: dict[str, Any], metrics: dict[str, Any], *, tenant: str = DEFAULT_TENANT
    ) -> int:
        """Store a serialized model of `tenant` (`traces.tenants`; `POOLED` for the model of every tenant's
        steps) under the next version number (1, 2, ...: one sequence for all tenants, so a version names one
        model; never one issued before, even if its model was deleted: `traces.versions`) and return that
        version."""

        def body() -> int:
            version = next_version(self, "models")
            self.db.execute(
                "INSERT INTO models (created, version, metadata, metrics, blob, tenant) VALUES (?, ?, ?, ?, ?, ?)",
                [_now(), version, json.dumps(metadata, default=str), json.dumps(metrics, default=str), blob, tenant],
            )
            return version

        return self._write(body)

    def latest_model(self, tenant: str = DEFAULT_TENANT) -> StoredModel | None:
        """The newest model of `tenant`, or None before its first `save_model`. `BadRowError`, naming the row and
        column, when its metadata or metrics are not a JSON object."""
        rows = self._retry(
            lambda: self.db.execute(
                "SELECT version, created, metadata, metrics, blob, tenant FROM models WHERE tenant = ? "
                "ORDER BY version DESC LIMIT 1",
                [tenant],
            ).fetchall()
        )
        if not rows:
            return None
        version, created, metadata, metrics, blob, tenant = rows[0]
        row = f"version {version}"
        return StoredModel(
            version=version, created=created, tenant=tenant,
            blob=bytes(blob) if isinstance(blob, memoryview) else blob,  # a memoryview from some drivers
            metadata=read_json(OBJECT, metadata, row_name(self.path, "models", row, "metadata")),
            metrics=read_json(OBJECT, metrics, row_name(self.path, "models", row, "metrics")),
        )  # fmt: skip

    def latest_model_version(self, tenant: str | None = None) -> int | None:
        """The newest model's version, of `tenant` (None: of any, `traces.versions.latest_version`), without
        reading the model; None before one."""
        if tenant is None:
            return latest_version(self, "models")
        sql = "SELECT max(version) FROM models WHERE tenant = ?"
        return self._retry(lambda: self.db.execute(sql, [tenant]).fetchone()[0])

    def prune_models(self, keep: int) -> int:
        """Delete every model version but the newest `keep` (at least 1) of each tenant; returns how many were
        deleted."""
        sql = (
            "DELETE FROM models WHERE version NOT IN (SELECT version FROM (SELECT version, row_number() OVER "
            "(PARTITION BY tenant ORDER BY version DESC) AS newest FROM models) AS ranked WHERE newest <= ?)"
        )
        return self._prune(sql, keep)

    def _prune(self, sql: str, keep: int) -> int:
        """Run `sql`, a DELETE of all model versions but the newest `?`, with `keep`, which must be at least 1 (the
        planner loads the newest model); returns how many rows went."""
        if keep < 1:
            raise ValueError(f"keep must be at least 1 (the planner loads the newest model), got {keep}")
        return self._write(lambda: self.db.execute(sql, [keep]).rowcount)

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop using the database; the process's connection closes with its last user. Idempotent."""
        self._shared = None
        self._release()  # runs `connection.release` once, whether called here or at garbage collection

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TraceStore({self.path!r})"  # a URL's password hidden
