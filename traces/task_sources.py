"""The trace store's part in replanning: the task each run was planned from, so that `/v1/replan` (and the
MCP `replan` tool) can plan a run again after the service restarted, or on another service sharing the file.

    remember_task_source(store, run_id, {"domain": ..., "problem": ...})   # JSON-able: what the plan call got
    task_source(store, run_id)                                            # the same dict, or None

One copy per distinct task (`task_sources`, keyed by the SHA-256 of the source's canonical JSON): an agent
plans one task many times, and a large PDDL problem is ~100 KB. Functions, not `TraceStore` methods, like
`traces.selection`: the store stays about storage; they go through its retry and transaction helpers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from traces.store import TraceStore, _now


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
        store.db.execute("INSERT OR IGNORE INTO task_sources (key, source, created) VALUES (?, ?, ?)",
                         [key, text, _now()])
        store.db.execute("INSERT OR REPLACE INTO run_tasks (run_id, key) VALUES (?, ?)", [run_id, key])

    store._write(body)
    return key


def task_source(store: TraceStore, run_id: str) -> dict[str, Any] | None:
    """The source `run_id` was planned from, or None when this store never heard of the run."""
    sql = ("SELECT task_sources.source FROM run_tasks JOIN task_sources ON task_sources.key = run_tasks.key "
           "WHERE run_tasks.run_id = ?")
    rows = store._retry(lambda: store.db.execute(sql, [run_id]).fetchall())
    return json.loads(rows[0][0]) if rows else None
