"""Idempotent recording: a step is identified by its `(run_id, step)`, so recording it again changes nothing.

Runtimes retry: an HTTP client re-posts a batch whose answer it never saw, an operator imports the same JSONL file
twice, an agent resumes a run. Recorded again, such steps would double the counts the learner trains on, without
a word. So each incoming step is sorted into one of three kinds, against the steps already stored and the ones
earlier in the same batch:

- new: no step with that `(run_id, step)` yet; written.
- skipped: the same step again, equal in every field (compared as records, so a JSON text written in another key
  order counts as the same); not written, counted.
- conflict: that `(run_id, step)` is stored with different content (another outcome, another action...); not
  written, reported with the fields that differ, because only the caller knows which one is right.

The lookup runs inside the write transaction, which holds the write lock (`traces.backends`), so two processes
recording the same step at once cannot both find it missing; the unique index of schema 4 (`traces.schema._v4`)
holds the line in the database too.

A batch may also carry an idempotency key (HTTP's `Idempotency-Key`). The first batch under a key is recorded as
above and its report kept with the key and the batch's fingerprint (`step_batches`, in the same transaction: the
steps and the answer land together or not at all); the same batch again under that key is answered with the kept report,
word for word, and writes nothing; other steps under a used key are refused (`IdempotencyKeyReused`) and write
nothing. Without a key a retry is still recorded once, but answered `skipped`. Keys are kept
`KEEP_BATCHES_DAYS` days (a retry comes within minutes; a restart or an outage may take longer), pruned when a
new key is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from traces.backends import SQLITE, Backend
from traces.errors import IdempotencyKeyReused
from traces.rows import STEP_COLUMNS, row_step

log = logging.getLogger("traces.store")
Key = tuple[str, int]
LOOKUP_CHUNK = 20_000  # keys per lookup query: one JSON array parameter, joined on the (run_id, step) index
KEEP_BATCHES_DAYS = 7


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
    recorded exactly so, `conflicts` steps not written because their id holds other content; `replayed`: this is
    the report of the first batch under the same idempotency key, and nothing was written now."""

    recorded: int = 0
    skipped: int = 0
    conflicts: list[StepConflict] = field(default_factory=list)
    replayed: bool = False  # the kept report of a batch recorded before under the same idempotency key


def existing_rows(conn: Any, keys: Sequence[Key], backend: Backend = SQLITE) -> dict[Key, list[tuple]]:
    """The stored rows (in `STEP_COLUMNS` order) of each of `keys` that has any; several for a step recorded
    more than once before schema 4. `conn`: the store's connection (`sqlite3` or `backends.PostgresConnection`)."""
    found: dict[Key, list[tuple]] = {}
    sql = backend.steps_by_key.format(columns=", ".join(f"s.{c}" for c in STEP_COLUMNS))
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


def batch_fingerprint(rows: Sequence[tuple]) -> str:
    """The SHA-256 of a batch's rows (`STEP_COLUMNS` order, JSON columns in canonical form): one batch, one
    fingerprint, however its steps were spelled (a plan spelling or name and args, keys in any order)."""
    return hashlib.sha256(json.dumps(list(rows), separators=(",", ":")).encode()).hexdigest()


def answered_batch(conn: Any, path: str, key: str, fingerprint: str) -> RecordReport | None:
    """The report the batch first recorded under `key` was answered with, or None when `key` is new;
    `IdempotencyKeyReused` when that batch had other steps. Call inside the write transaction."""
    found = conn.execute("SELECT fingerprint, report, created FROM step_batches WHERE key = ?", [key]).fetchone()
    if found is None:
        return None
    if found[0] != fingerprint:
        raise IdempotencyKeyReused(path, found[2])
    kept = json.loads(found[1])
    conflicts = [StepConflict(c["run_id"], c["step"], c["index"], tuple(c["fields"])) for c in kept["conflicts"]]
    return RecordReport(recorded=kept["recorded"], skipped=kept["skipped"], conflicts=conflicts, replayed=True)


def keep_batch(conn: Any, key: str, fingerprint: str, report: RecordReport) -> None:
    """Keep `report` as the answer to the batch under `key`, and forget keys older than `KEEP_BATCHES_DAYS`. Call
    inside the write transaction that recorded the batch. Timestamps are ISO text in UTC: they sort as text."""
    kept = {"recorded": report.recorded, "skipped": report.skipped, "conflicts": [asdict(c) for c in report.conflicts]}
    now = datetime.now(UTC)
    cutoff = (now - timedelta(days=KEEP_BATCHES_DAYS)).isoformat(timespec="milliseconds")
    conn.execute("DELETE FROM step_batches WHERE created < ?", [cutoff])
    conn.execute(
        "INSERT INTO step_batches (key, fingerprint, report, created) VALUES (?, ?, ?, ?)",
        [key, fingerprint, json.dumps(kept), now.isoformat(timespec="milliseconds")],
    )


PROVENANCE = "step_provenance"  # who posted each step through the service (`traces.provenance`)
PROVENANCE_DDL = (
    f"CREATE TABLE IF NOT EXISTS {PROVENANCE} (run_id TEXT NOT NULL, step INTEGER NOT NULL, tenant TEXT NOT NULL, "
    "principal TEXT NOT NULL, recorded TEXT NOT NULL, PRIMARY KEY (run_id, step))"
)


def keep_provenance(db: Any, backend: Backend, steps: Sequence[Key], tenant: str, principal: str) -> None:
    """Note, inside the caller's write transaction, that `principal` of `tenant` posted `steps` (their
    `(run_id, step)`); a step that already has a provenance keeps it. Called by `TraceStore.record_steps` in the
    transaction that writes the steps, so a step is never stored without the provenance the poison guard reads."""
    if not steps:
        return
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    rows = [(run_id, step, tenant, principal, now) for run_id, step in steps]
    db.execute(PROVENANCE_DDL)
    columns = ("run_id", "step", "tenant", "principal", "recorded")
    backend.insert_rows(db.conn, PROVENANCE, columns, rows, skip_existing=True)
