"""The trace store: one SQLite file (or one PostgreSQL database) of runs, plans, executed steps and learned models,
safe for several writer processes at once. Depends on nothing else in this project.

    store = TraceStore("traces.db")            # or $PORTFOLIO_TRACES, else ./traces.db
    store = TraceStore("postgresql://planner@db.internal/traces")   # the same store on PostgreSQL
    run = store.start_run(task.fingerprint, "deliver p1")
    store.record_steps([StepRecord(run_id=run, step=0, action="drive", args=("t1", "a", "b"), outcome="success")])
    store.end_run(run, "success")
    store.stats()

Every store on one database in one process shares one connection (`traces.connection` explains why nothing else
may open the file); `backup` and `vacuum` are the maintenance calls behind `portfolio traces backup|vacuum`.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traces.errors import BadRowError as BadRowError
    from traces.errors import CorruptDatabaseError as CorruptDatabaseError
    from traces.errors import DatabaseLockedError as DatabaseLockedError
    from traces.errors import DiskFullError as DiskFullError
    from traces.errors import IdempotencyKeyReused as IdempotencyKeyReused
    from traces.errors import ReadOnlyDatabaseError as ReadOnlyDatabaseError
    from traces.errors import SchemaVersionError as SchemaVersionError
    from traces.errors import StepConflictError as StepConflictError
    from traces.errors import StoreUnavailableError as StoreUnavailableError
    from traces.errors import TraceImportError as TraceImportError
    from traces.errors import TraceStoreError as TraceStoreError
    from traces.jsonl import ImportReport as ImportReport
    from traces.jsonl import export_jsonl as export_jsonl
    from traces.jsonl import import_jsonl as import_jsonl
    from traces.maintenance import backup as backup
    from traces.maintenance import vacuum as vacuum
    from traces.recording import RecordReport as RecordReport
    from traces.recording import StepConflict as StepConflict
    from traces.records import ActionStats as ActionStats
    from traces.records import RunRecord as RunRecord
    from traces.records import StepRecord as StepRecord
    from traces.records import StoredModel as StoredModel
    from traces.schema import SCHEMA_VERSION as SCHEMA_VERSION
    from traces.store import TraceStore as TraceStore
    from traces.store import default_path as default_path

# name -> the module that defines it; resolved on first use (PEP 562), so that a module that needs one light name
# (`traces.tenants`, `traces.errors`) does not import the store and sqlite-utils with it: `portfolio plan` without
# a trace store never opens one
_HOMES = {
    "BadRowError": "traces.errors",
    "CorruptDatabaseError": "traces.errors",
    "DatabaseLockedError": "traces.errors",
    "DiskFullError": "traces.errors",
    "IdempotencyKeyReused": "traces.errors",
    "ReadOnlyDatabaseError": "traces.errors",
    "SchemaVersionError": "traces.errors",
    "StepConflictError": "traces.errors",
    "StoreUnavailableError": "traces.errors",
    "TraceImportError": "traces.errors",
    "TraceStoreError": "traces.errors",
    "ImportReport": "traces.jsonl",
    "export_jsonl": "traces.jsonl",
    "import_jsonl": "traces.jsonl",
    "backup": "traces.maintenance",
    "vacuum": "traces.maintenance",
    "RecordReport": "traces.recording",
    "StepConflict": "traces.recording",
    "ActionStats": "traces.records",
    "RunRecord": "traces.records",
    "StepRecord": "traces.records",
    "StoredModel": "traces.records",
    "SCHEMA_VERSION": "traces.schema",
    "TraceStore": "traces.store",
    "default_path": "traces.store",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'traces' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
