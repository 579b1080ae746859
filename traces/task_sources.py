"""The trace store's part in replanning: the task each run was planned from, so that `/v1/replan` (and the
MCP `replan` tool) can plan a run again after the service restarted, or on another service sharing the file.

    remember_task_source(store, run_id, {"domain": ..., "problem": ...})   # JSON-able: what the plan call got
    task_source(store, run_id)                                            # the same dict, or None

One copy per distinct task (`task_sources`, keyed by the SHA-256 of the source's canonical JSON): an agent
plans one task many times, and a large PDDL problem is ~100 KB. Bounded: the newest `MAX_STORED_SOURCES` tasks are
kept, and none older than `MAX_AGE_DAYS` (a runtime
replans within minutes); pruning runs in the same transaction as the write that adds a new task, and the
runs of a pruned task are forgotten with it, their kept plans too (`traces.run_plans`; replanning them is a 404:
plan again). Functions, not `TraceStore`
methods, like
`traces.selection`: the store stays about storage; they go through its retry and transaction helpers.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC
from typing import Any

from traces.store import TraceStore, _now
from traces.stored_json import OBJECT, read_json, row_name

MAX_STORED_SOURCES = 1024
MAX_AGE_DAYS = 30


def canonical(source: dict[str, Any]) -> tuple[str, str]:
    """The source's canonical JSON text and its SHA-256 (the key): equal sources, one key."""
    text = json.dumps(source, sort_keys=True)
    return text, hashlib.sha256(text.encode()).hexdigest()


def source_key(source: dict[str, Any]) -> str:
    return canonical(source)[1]


def remember_task_source(store: TraceStore, run_id: str, source: dict[str, Any]) -> str:
    """Record that `run_id` was planned from `source` (one transaction; the text is written only the first
    time this task is seen). Returns the source's key."""
    text, key = canonical(source)

    def body() -> None:
        added = store.db.execute(
            "INSERT INTO task_sources (key, source, created) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [key, text, _now()],
        ).rowcount
        store.db.execute(
            "INSERT INTO run_tasks (run_id, key) VALUES (?, ?) ON CONFLICT (run_id) DO UPDATE SET key = excluded.key",
            [run_id, key],
        )
        if added:
            _prune(store, key)

    store._write(body)
    return key


def _prune(store: TraceStore, keep: str) -> None:
    """Drop the tasks beyond the newest MAX_STORED_SOURCES or older than MAX_AGE_DAYS (never `keep`, just
    added), and the runs that named them. `created` is an ISO timestamp: it sorts as text."""
    from datetime import datetime, timedelta

    cutoff = (datetime.now(UTC) - timedelta(days=MAX_AGE_DAYS)).strftime("%Y-%m-%dT%H:%M:%S")
    pruned = store.db.execute(
        "DELETE FROM task_sources WHERE key != ? AND (created < ? OR key NOT IN (SELECT key FROM task_sources "
        f"ORDER BY created DESC, {store.backend.insertion_order} DESC LIMIT ?))",
        [keep, cutoff, MAX_STORED_SOURCES],
    ).rowcount
    if pruned:
        store.db.execute("DELETE FROM run_tasks WHERE key NOT IN (SELECT key FROM task_sources)")
        store.db.execute("DELETE FROM run_plans WHERE run_id NOT IN (SELECT run_id FROM run_tasks)")


def task_source(store: TraceStore, run_id: str) -> dict[str, Any] | None:
    """The source `run_id` was planned from, or None when this store never heard of the run; `BadRowError`
    (naming the row) when its text is not a JSON object."""
    sql = (
        "SELECT task_sources.key, task_sources.source FROM run_tasks JOIN task_sources "
        "ON task_sources.key = run_tasks.key WHERE run_tasks.run_id = ?"
    )
    rows = store._retry(lambda: store.db.execute(sql, [run_id]).fetchall())
    if not rows:
        return None
    key, text = rows[0]
    return read_json(OBJECT, text, row_name(store.path, "task_sources", f"key {key}", "source"))
