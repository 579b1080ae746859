"""Idempotent recording: a step is identified by its `(run_id, step)`, so recording it again changes nothing.

Runtimes retry: an HTTP client re-posts a batch whose answer it never saw, an operator imports the same JSONL file
twice, an agent resumes a run. Before schema 4 every such retry added the steps again and doubled the counts the
learner trains on, without a word. Now each incoming step is sorted into one of three kinds, against the steps
already stored and the ones earlier in the same batch:

- new: no step with that `(run_id, step)` yet; written.
- skipped: the same step again, equal in every field (compared as records, so a JSON text written by an older
  release in another key order still counts as the same); not written, counted.
- conflict: that `(run_id, step)` is stored with different content (another outcome, another action...); not
  written, reported with the fields that differ, because only the caller knows which one is right.

The lookup runs inside the write transaction (BEGIN IMMEDIATE, `traces.store`), so two processes recording the
same step at once cannot both find it missing; the unique index of schema 4 (`traces.schema._v4`) holds the line
in SQLite too.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from traces.rows import STEP_COLUMNS, row_step

log = logging.getLogger("traces.store")
Key = tuple[str, int]
LOOKUP_CHUNK = 20_000  # keys per lookup query: one JSON array parameter, joined on the (run_id, step) index


@dataclass(frozen=True)
class StepConflict:
    """A step whose `(run_id, step)` was already recorded with other content; `index` is its position in the
    batch (`traces.jsonl` turns it into a line number), `fields` the fields that differ."""

    run_id: str
    step: int
    index: int
    fields: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"step {self.step} of run {self.run_id!r} is already recorded with a different "
            f"{', '.join(self.fields)}: not recorded (a step is identified by run_id and step)"
        )


@dataclass
class RecordReport:
    """What `TraceStore.record_steps` did with a batch: `recorded` new steps written, `skipped` steps already
    recorded exactly so, `conflicts` steps not written because their id holds other content."""

    recorded: int = 0
    skipped: int = 0
    conflicts: list[StepConflict] = field(default_factory=list)


def existing_rows(conn: sqlite3.Connection, keys: Sequence[Key]) -> dict[Key, list[tuple]]:
    """The stored rows (in `STEP_COLUMNS` order) of each of `keys` that has any; several for a step recorded
    more than once before schema 4."""
    found: dict[Key, list[tuple]] = {}
    columns = ", ".join(f"s.{c}" for c in STEP_COLUMNS)
    sql = (
        f"SELECT {columns} FROM json_each(?) AS k JOIN steps AS s "
        "ON s.run_id = json_extract(k.value, '$[0]') AND s.step = json_extract(k.value, '$[1]') ORDER BY s.id"
    )
    for start in range(0, len(keys), LOOKUP_CHUNK):
        chunk = json.dumps([list(k) for k in keys[start : start + LOOKUP_CHUNK]])
        for row in conn.execute(sql, [chunk]):
            found.setdefault((row[0], row[1]), []).append(tuple(row))
    return found


def differing_fields(old: tuple, new: tuple) -> tuple[str, ...]:
    """The fields in which two step rows differ, compared as records (not as JSON text); () if none."""
    if old == new:
        return ()
    a, b = row_step(old).model_dump(), row_step(new).model_dump()
    return tuple(name for name in a if a[name] != b[name])


def classify(rows: Sequence[tuple], stored: dict[Key, list[tuple]]) -> tuple[list[tuple], RecordReport]:
    """Sort `rows` (in `STEP_COLUMNS` order) into the ones to write and a report of the rest; `stored` are the
    rows already in the database for the batch's keys (`existing_rows`)."""
    report = RecordReport()
    fresh: list[tuple] = []
    seen: dict[Key, list[tuple]] = {}  # stored rows, and the rows taken earlier in this batch
    for index, row in enumerate(rows):
        key = (row[0], row[1])
        earlier = seen.get(key)
        if earlier is None:
            earlier = seen[key] = list(stored.get(key, ()))
        if not earlier:
            fresh.append(row)
            earlier.append(row)
            continue
        differences = [differing_fields(old, row) for old in earlier]
        if any(not d for d in differences):
            report.skipped += 1
        else:
            report.conflicts.append(StepConflict(row[0], row[1], index, differences[0]))
    report.recorded = len(fresh)
    return fresh, report


def log_conflicts(path: str, report: RecordReport, shown: int = 5) -> None:
    """Warn about the conflicts of a batch (the first `shown`, then how many more): a Python caller may not
    read the report."""
    for conflict in report.conflicts[:shown]:
        log.warning("trace store %s: %s", path, conflict)
    if len(report.conflicts) > shown:
        log.warning("trace store %s: %d more conflicting steps not recorded", path, len(report.conflicts) - shown)
