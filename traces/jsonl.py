"""JSONL import and export of step records: one `StepRecord` JSON object per line.

Import is never half-done silently: every bad line is reported with its line number and what was wrong.
`strict=True` refuses the whole file when any line is bad (nothing is written); otherwise the good lines go in
as one transaction and the bad ones come back in the report.

Importing is idempotent (`traces.recording`): a step already recorded exactly so is skipped and counted, so the
same file imported twice changes nothing the second time; a line whose (run_id, step) is recorded with other
content is a conflict, reported with its line number like a bad line (and refusing the file under `strict`).

Neither ever touches the store's own file with anything but SQLite: an export onto it (`-o traces.db`) replaced
the database, models and runs included, with a JSONL file of its steps, and an import of it read the live
database with a plain open(), whose close drops the process's SQLite locks (`traces.connection`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from pydantic import ValidationError

from traces.errors import StepConflictError, TraceImportError, TraceStoreError
from traces.records import StepRecord
from traces.rows import STEP_COLUMNS, row_step
from traces.store import TraceStore


@dataclass
class ImportReport:
    path: str
    imported: int = 0
    skipped: int = 0  # steps already recorded exactly so
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line number, message): bad or conflicting

    @property
    def ok(self) -> bool:
        return not self.problems


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "line"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_line(text: str) -> StepRecord:
    """One JSONL line -> StepRecord; raises ValueError with a short reason."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, found {type(data).__name__}")
    try:
        return StepRecord.model_validate(data)
    except ValidationError as error:
        raise ValueError(_describe(error)) from None


def _read_numbered(path: str) -> tuple[list[StepRecord], list[int], list[tuple[int, str]]]:
    """Parse a whole file: the good records, the line number of each, and the `(line number, reason)` of each bad
    line. Blank lines are skipped. Raises TraceImportError if the file cannot be read as UTF-8 text."""
    records: list[StepRecord] = []
    numbers: list[int] = []
    problems: list[tuple[int, str]] = []
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the first line's JSON
        with open(path, encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    records.append(parse_line(line))
                    numbers.append(number)
                except ValueError as error:
                    problems.append((number, str(error)))
    except UnicodeDecodeError as error:
        raise TraceImportError(path, [(0, f"not UTF-8 text ({error.reason} at byte {error.start})")]) from None
    except OSError as error:
        raise TraceImportError(path, [(0, f"cannot read the file ({error.strerror})")]) from None
    return records, numbers, problems


def import_jsonl(store: TraceStore, path: str | os.PathLike[str], *, strict: bool = False) -> ImportReport:
    """Import a JSONL file of steps into `store` (a path ending in `.csv`: a CSV file of steps,
    `traces.csv_steps`).

    strict: any bad or conflicting line raises `TraceImportError` and nothing is imported. Otherwise the good
    lines are written in one transaction and the bad and conflicting ones are listed in the returned report
    (and logged by the caller); steps already recorded are skipped and counted.
    """
    path = str(path)
    if _is_store_file(store, path):
        raise TraceImportError(path, [(0, "is the trace database itself; expected a JSONL or CSV file of steps")])
    if path.lower().endswith(".csv"):
        from traces.csv_steps import read_csv_numbered

        records, numbers, problems = read_csv_numbered(path)
    else:
        records, numbers, problems = _read_numbered(path)
    if problems and strict:
        raise TraceImportError(path, problems, imported=0)
    try:
        done = store.record_steps(records, all_or_nothing=strict, log_conflicts=False)  # listed in the report
    except StepConflictError as error:
        raise TraceImportError(path, [(numbers[c.index], str(c)) for c in error.conflicts], imported=0) from None
    problems += [(numbers[c.index], str(c)) for c in done.conflicts]
    problems.sort()
    return ImportReport(path=path, imported=done.recorded, skipped=done.skipped, problems=problems)


def iter_jsonl(store: TraceStore, action: str | None = None) -> Iterator[str]:
    """Every stored step as one JSON line (no newline), in insertion order; optional fields left out when empty."""
    for chunk in store.iter_step_chunks(STEP_COLUMNS, action=action):
        for row in chunk:
            record = row_step(row)
            yield record.model_dump_json(exclude_none=True)


def export_jsonl(store: TraceStore, output: str | os.PathLike[str] | IO[str] | None = None) -> int:
    """Write every step as JSONL to `output` (a path, an open text file, or stdout); returns the line count."""
    if output is None or output == "-":
        return _write_lines(store, sys.stdout)
    if hasattr(output, "write"):
        return _write_lines(store, output)  # type: ignore[arg-type]
    if _is_store_file(store, str(output)):
        raise TraceStoreError(
            f"{output}: is the trace database itself (or one of its -wal, -shm files); expected a new file for "
            "the JSONL export. Nothing was written."
        )
    tmp = f"{output}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        count = _write_lines(store, handle)
    os.replace(tmp, output)  # a reader never sees a half-written export
    return count


def _write_lines(store: TraceStore, handle: IO[str]) -> int:
    count = 0
    for line in iter_jsonl(store):
        handle.write(line + "\n")
        count += 1
    return count


def _is_store_file(store: TraceStore, path: str) -> bool:
    """Whether `path` names `store`'s database or a file SQLite keeps beside it (by name, symlinks resolved, and
    by inode for a hard link; `os.stat` opens nothing)."""
    database = os.path.realpath(store.path)
    names = {database + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    if os.path.realpath(path) in names:
        return True
    try:
        return os.path.samefile(path, database)
    except OSError:
        return False
