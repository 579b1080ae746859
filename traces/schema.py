"""The trace database schema and its migrations: one schema and one migration path for SQLite and PostgreSQL.

`MIGRATIONS[i]` moves a database from version `i` to `i + 1`, in SQL that both databases read, with the types
that differ taken from `traces.backends` (an id column, bytes). Each runs in the caller's write transaction, so a
database is never left half-migrated (PostgreSQL's DDL is transactional too). The version lives in `PRAGMA
user_version` on SQLite (0 = empty file; every file written before PostgreSQL was supported has it there) and in
a one-row `schema_version` table on PostgreSQL. A database written by a newer release (a version above
SCHEMA_VERSION) is refused rather than guessed at. The choice and its alternatives:
docs/decisions/schema-migrations.md.

A migration takes the database handle (`sqlite_utils.Database` or `traces.backends.PostgresDatabase`): the tests
build old SQLite files at each version by running the first migrations on a bare connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traces.backends import backend_of
from traces.errors import SchemaVersionError


def _v1(db: Any) -> None:
    backend = backend_of(db)
    db.execute(
        "CREATE TABLE runs (id TEXT PRIMARY KEY, fingerprint TEXT, goal TEXT, started TEXT, ended TEXT, outcome TEXT)"
    )
    db.execute(
        f"CREATE TABLE plans (id {backend.id_column}, run_id TEXT, delegate TEXT, "
        "attempts TEXT, latency_ms FLOAT, plan TEXT, recorded TEXT)"
    )  # attempts: JSON list of attempts; plan: JSON list of grounded actions
    db.execute(
        f"CREATE TABLE steps (id {backend.id_column}, run_id TEXT NOT NULL, step INTEGER NOT NULL, "
        "action TEXT NOT NULL, args TEXT NOT NULL, features TEXT NOT NULL, outcome TEXT NOT NULL, "
        "failure_category TEXT, error TEXT, duration_ms FLOAT, expected_effects TEXT, observed_effects TEXT, "
        "generation INTEGER, timestamp TEXT)"
    )  # id: insertion order, the time axis the learner decays over; args, features, *_effects: JSON
    db.execute(
        f"CREATE TABLE models (id {backend.id_column}, created TEXT, version INTEGER NOT NULL, metadata TEXT, "
        f"metrics TEXT, blob {backend.blob} NOT NULL)"
    )
    db.execute("CREATE INDEX idx_plans_run_id ON plans (run_id)")
    db.execute("CREATE INDEX idx_steps_action ON steps (action)")
    db.execute("CREATE INDEX idx_steps_run_id_step ON steps (run_id, step)")
    db.execute("CREATE UNIQUE INDEX idx_models_version ON models (version)")


def _v2(db: Any) -> None:
    """Configuration selection (`learning.selection`): each run names its domain (the domain text's hash, so the
    problems of one domain file are found together; NULL in runs recorded before), and the fitted selection
    models get a table of their own, apart from the failure models in `models`."""
    db.execute("ALTER TABLE runs ADD COLUMN domain TEXT")
    db.execute("CREATE INDEX idx_runs_domain ON runs (domain)")
    db.execute(
        f"CREATE TABLE selection_models (id {backend_of(db).id_column}, created TEXT, version INTEGER NOT NULL, "
        "metadata TEXT, model TEXT NOT NULL)"
    )
    db.execute("CREATE UNIQUE INDEX idx_selection_models_version ON selection_models (version)")


def _v3(db: Any) -> None:
    """Replanning a run after a restart or on another server sharing the file (`traces.task_sources`): the task
    text each run was planned from, one copy per distinct task (an agent plans one task many times)."""
    db.execute("CREATE TABLE task_sources (key TEXT PRIMARY KEY, source TEXT NOT NULL, created TEXT)")
    db.execute("CREATE TABLE run_tasks (run_id TEXT PRIMARY KEY, key TEXT NOT NULL)")


def _v4(db: Any) -> None:
    """Idempotent recording (`traces.recording`): a step is identified by (run_id, step), held by a unique index.
    Steps recorded more than once before (importing a file twice added it twice) are all kept: the first of each
    (run_id, step) is `copy` 0, later ones 1, 2, ... in insertion order, so the index holds without deleting a
    row; every step recorded from now on is copy 0, so a second one with the same id is refused by SQLite."""
    db.execute("ALTER TABLE steps ADD COLUMN copy INTEGER NOT NULL DEFAULT 0")
    db.execute(
        "UPDATE steps SET copy = ranked.n FROM (SELECT id, row_number() OVER (PARTITION BY run_id, step "
        "ORDER BY id) - 1 AS n FROM steps) AS ranked WHERE steps.id = ranked.id AND ranked.n > 0"
    )
    db.execute("DROP INDEX IF EXISTS idx_steps_run_id_step")  # the unique index below leads with the same columns
    db.execute("CREATE UNIQUE INDEX idx_steps_identity ON steps (run_id, step, copy)")


def _v5(db: Any) -> None:
    """Learned costs in time (`learning.durations`): whether a failed step left side effects (1 / 0; NULL when
    unknown, as in every step recorded before)."""
    db.execute("ALTER TABLE steps ADD COLUMN side_effects INTEGER")


def _v6(db: Any) -> None:
    """Runs the service follows (`traces.run_plans`): each run's current plan, the cost model it was made under
    and the number its first step takes, so a replan after a restart still knows which steps ran; and the answer
    to each batch of steps recorded under an idempotency key (`traces.recording`), so a retried batch gets the
    same answer after a restart too."""
    db.execute(
        "CREATE TABLE run_plans (run_id TEXT PRIMARY KEY, plan TEXT NOT NULL, cost_model TEXT, "
        "first_step INTEGER NOT NULL, updated TEXT)"
    )
    db.execute(
        "CREATE TABLE step_batches (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, report TEXT NOT NULL, "
        "created TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX idx_step_batches_created ON step_batches (created)")


def _v7(db: Any) -> None:
    """Learned costs per tenant (`traces.tenants`): each failure model is one tenant's (or the pooled model's),
    fit on its steps alone. The models stored before were fit on every step; they become the default tenant's,
    whose steps are all a store without API keys holds."""
    db.execute("ALTER TABLE models ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'")
    db.execute("CREATE INDEX idx_models_tenant_version ON models (tenant, version)")


MIGRATIONS: list[Callable[[Any], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(db: Any) -> int:
    """The database's schema version (0: no trace tables yet)."""
    return backend_of(db).read_version(db)


def check_version(db: Any, path: str) -> int:
    """The database's schema version; raises `SchemaVersionError` when it is newer than this code."""
    version = user_version(db)
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: trace database has schema version {version}, but this portfolio-planner knows versions up "
            f"to {SCHEMA_VERSION}. It was written by a newer release: upgrade portfolio-planner, or point "
            "--traces / PORTFOLIO_TRACES at another database."
        )
    return version


def migrate(db: Any, path: str) -> int:
    """Bring the schema up to `SCHEMA_VERSION`; call inside a write transaction (it holds the write lock) so that
    two processes opening a fresh database at once do not both create the tables."""
    version = check_version(db, path)
    backend = backend_of(db)
    for step in MIGRATIONS[version:]:
        step(db)
        version += 1
        backend.write_version(db, version)
    return version
