"""The trace database schema and its migrations.

The schema version lives in `PRAGMA user_version` (0 = empty file). `MIGRATIONS[i]` moves a database from version
`i` to `i + 1`; each runs in the caller's transaction, so a database is never left half-migrated. A database
written by a newer release (user_version > SCHEMA_VERSION) is refused rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

from traces.errors import SchemaVersionError


def _v1(db: sqlite_utils.Database) -> None:
    db.table("runs").create(
        {"id": str, "fingerprint": str, "goal": str, "started": str, "ended": str, "outcome": str}, pk="id"
    )
    db.table("plans").create(
        {
            "id": int,
            "run_id": str,
            "delegate": str,
            "attempts": str,  # JSON list of attempts
            "latency_ms": float,
            "plan": str,  # JSON list of grounded actions
            "recorded": str,
        },
        pk="id",
    )
    db.table("steps").create(
        {
            "id": int,  # insertion order: the time axis the learner decays over
            "run_id": str,
            "step": int,
            "action": str,
            "args": str,  # JSON list
            "features": str,  # JSON object
            "outcome": str,
            "failure_category": str,
            "error": str,
            "duration_ms": float,
            "expected_effects": str,  # JSON list or NULL
            "observed_effects": str,  # JSON list or NULL
            "generation": int,
            "timestamp": str,
        },
        pk="id",
        not_null={"run_id", "step", "action", "args", "features", "outcome"},
    )
    db.table("models").create(
        {"id": int, "created": str, "version": int, "metadata": str, "metrics": str, "blob": bytes},
        pk="id",
        not_null={"version", "blob"},
    )
    db.table("plans").create_index(["run_id"])
    db.table("steps").create_index(["action"])
    db.table("steps").create_index(["run_id", "step"])
    db.table("models").create_index(["version"], unique=True)


def _v2(db: sqlite_utils.Database) -> None:
    """Configuration selection (`learning.selection`): each run names its domain (the domain text's hash, so the
    problems of one domain file are found together; NULL in runs recorded before), and the fitted selection
    models get a table of their own, apart from the failure models in `models`."""
    db.table("runs").add_column("domain", str)
    db.table("runs").create_index(["domain"])
    db.table("selection_models").create(
        {"id": int, "created": str, "version": int, "metadata": str, "model": str},
        pk="id",
        not_null={"version", "model"},
    )
    db.table("selection_models").create_index(["version"], unique=True)


def _v3(db: sqlite_utils.Database) -> None:
    """Replanning a run after a restart or on another server sharing the file (`traces.task_sources`): the task
    text each run was planned from, one copy per distinct task (an agent plans one task many times)."""
    db.table("task_sources").create({"key": str, "source": str, "created": str}, pk="key", not_null={"source"})
    db.table("run_tasks").create({"run_id": str, "key": str}, pk="run_id", not_null={"key"})


def _v4(db: sqlite_utils.Database) -> None:
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


def _v5(db: sqlite_utils.Database) -> None:
    """Learned costs in time (`learning.durations`): whether a failed step left side effects (1 / 0; NULL when
    unknown, as in every step recorded before)."""
    db.execute("ALTER TABLE steps ADD COLUMN side_effects INTEGER")


def _v6(db: sqlite_utils.Database) -> None:
    """Runs the service follows (`traces.run_plans`): each run's current plan, the cost model it was made under
    and the number its first step takes, so a replan after a restart still knows which steps ran; and the answer
    to each batch of steps recorded under an idempotency key (`traces.recording`), so a retried batch gets the
    same answer after a restart too."""
    db.table("run_plans").create(
        {"run_id": str, "plan": str, "cost_model": str, "first_step": int, "updated": str},
        pk="run_id",
        not_null={"plan", "first_step"},
    )
    db.table("step_batches").create(
        {"key": str, "fingerprint": str, "report": str, "created": str},
        pk="key",
        not_null={"fingerprint", "report", "created"},
    )
    db.table("step_batches").create_index(["created"])


def _v7(db: sqlite_utils.Database) -> None:
    """Learned costs per tenant (`traces.tenants`): each failure model is one tenant's (or the pooled model's),
    fit on its steps alone. The models stored before were fit on every step; they become the default tenant's,
    whose steps are all a store without API keys holds."""
    db.execute("ALTER TABLE models ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'")
    db.execute("CREATE INDEX idx_models_tenant_version ON models (tenant, version)")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(db: sqlite_utils.Database) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def check_version(db: sqlite_utils.Database, path: str) -> int:
    """The database's schema version; raises `SchemaVersionError` when it is newer than this code."""
    version = user_version(db)
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: trace database has schema version {version}, but this portfolio-planner knows versions up "
            f"to {SCHEMA_VERSION}. It was written by a newer release: upgrade portfolio-planner, or point "
            "--traces / PORTFOLIO_TRACES at another file."
        )
    return version


def migrate(db: sqlite_utils.Database, path: str) -> int:
    """Bring the schema up to `SCHEMA_VERSION`; call inside a write transaction (BEGIN IMMEDIATE) so that two
    processes opening a fresh file at once do not both create the tables."""
    version = check_version(db, path)
    for step in MIGRATIONS[version:]:
        step(db)
        version += 1
        db.execute(f"PRAGMA user_version = {version}")
    return version
