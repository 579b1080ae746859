"""The trace store: one SQLite file of runs, plans, executed steps and learned models, safe for several writer
processes at once. Depends on nothing else in this project.

    store = TraceStore("traces.db")            # or $PORTFOLIO_TRACES, else ./traces.db
    run = store.start_run(task.fingerprint, "deliver p1")
    store.record_steps([StepRecord(run_id=run, step=0, action="drive", args=("t1", "a", "b"), outcome="success")])
    store.end_run(run, "success")
    store.stats()

Every store on one file in one process shares one connection (`traces.connection` explains why nothing else
may open the file); `backup` and `vacuum` are the maintenance calls behind `portfolio traces backup|vacuum`.
"""

from traces.errors import (
    BadRowError,
    CorruptDatabaseError,
    DatabaseLockedError,
    DiskFullError,
    IdempotencyKeyReused,
    ReadOnlyDatabaseError,
    SchemaVersionError,
    StepConflictError,
    TraceImportError,
    TraceStoreError,
)
from traces.jsonl import ImportReport, export_jsonl, import_jsonl
from traces.maintenance import backup, vacuum
from traces.recording import RecordReport, StepConflict
from traces.records import ActionStats, RunRecord, StepRecord, StoredModel
from traces.schema import SCHEMA_VERSION
from traces.store import TraceStore, default_path

__all__ = [
    "SCHEMA_VERSION",
    "ActionStats",
    "BadRowError",
    "CorruptDatabaseError",
    "DatabaseLockedError",
    "DiskFullError",
    "IdempotencyKeyReused",
    "ImportReport",
    "ReadOnlyDatabaseError",
    "RecordReport",
    "RunRecord",
    "SchemaVersionError",
    "StepConflict",
    "StepConflictError",
    "StepRecord",
    "StoredModel",
    "TraceImportError",
    "TraceStore",
    "TraceStoreError",
    "backup",
    "default_path",
    "export_jsonl",
    "import_jsonl",
    "vacuum",
]
