"""What the service remembers of each run, for `/v1/replan` and the MCP `replan` tool: its task (a replan
sends only the run id and the observed state), the worker that planned it (its caches know the task) and its
current plan with the cost model it was made under (a replan keeps what is still valid: `plan-reuse`).

Bounded: the `MAX_RUNS` most recent runs; their task texts shared per task (runs of one task keep one copy) and
at most `MAX_SOURCES` tasks and `MAX_SOURCE_CHARS` characters in all, the oldest going first but never the one
just planned. Beyond that the trace store keeps task sources across restarts (`traces.task_sources`).
"""

from __future__ import annotations

import collections
import json
from typing import Any

from traces.task_sources import source_key

MAX_RUNS = 4096
MAX_SOURCES = 256  # task texts kept for replanning (a large PDDL problem is ~100 KB)
# ... and their characters in all: 256 bodies at the 32 MB limit would otherwise be 8 GB of one server's memory
MAX_SOURCE_CHARS = 64 * 1024 * 1024


class RunMemory:
    def __init__(self) -> None:
        self.runs: collections.OrderedDict[str, tuple[str, int]] = collections.OrderedDict()  # -> (task, worker)
        self.plans: collections.OrderedDict[str, tuple[list[str], str | None]] = collections.OrderedDict()
        self.sources: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._chars: dict[str, int] = {}  # task key -> characters of its texts (for MAX_SOURCE_CHARS)

    def remember(self, run_id: str, source: dict[str, Any], worker: int) -> dict[str, Any] | None:
        """Keep the run's task source (`domain`, `problem`, `task`) and worker. Returns the source when the run is
        new or now names another task (for the trace store to keep), else None."""
        key = source_key(source)  # the trace store's key too (`traces.task_sources`)
        known = self.runs.get(run_id)
        self.sources[key] = source
        self.sources.move_to_end(key)
        self._chars[key] = sum(len(source.get(k) or "") for k in ("domain", "problem")) + (
            len(json.dumps(source["task"])) if source.get("task") else 0
        )
        self.runs[run_id] = (key, worker)
        self.runs.move_to_end(run_id)
        while len(self.runs) > MAX_RUNS:
            self.runs.popitem(last=False)
        while len(self.sources) > 1 and (
            len(self.sources) > MAX_SOURCES or sum(self._chars.values()) > MAX_SOURCE_CHARS
        ):
            oldest, _ = self.sources.popitem(last=False)
            self._chars.pop(oldest, None)
        return source if known is None or known[0] != key else None

    def keep_plan(self, run_id: str, plan: list[str], cost_model: str | None) -> None:
        """The run's current plan (the last one planned or kept for it) and the cost model it was made under."""
        self.plans[run_id] = (list(plan), cost_model)
        self.plans.move_to_end(run_id)
        while len(self.plans) > MAX_RUNS:
            self.plans.popitem(last=False)

    def plan(self, run_id: str) -> tuple[list[str], str | None] | None:
        return self.plans.get(run_id)

    def task(self, run_id: str) -> tuple[dict[str, Any], int] | None:
        """The run's task source and worker, if still in memory."""
        entry = self.runs.get(run_id)
        source = self.sources.get(entry[0]) if entry is not None else None
        return (source, entry[1]) if entry is not None and source is not None else None
