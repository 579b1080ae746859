"""The results file: one JSON object per run, one line each, in `DIR/runs.jsonl`.

Appending a line and fsync'ing it before the next run is what makes an experiment resumable: a run is either in
the file, whole, or it is run again. A `kill -9` can only tear the line being written, which is always the last
one; `open_log` cuts such a torn tail off before appending (otherwise the next record would be glued to it), and
`read_runs` ignores it. Any other undecodable line means the file was edited or is not ours: that is an error with
the line number, never silently skipped, because a skipped line would be a lost run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from domains.errors import TaskInputError
from portfolio.engine.results import Resource

RUNS_FILE = "runs.jsonl"


class ResultsError(TaskInputError):
    """A results file that cannot be read as ours."""


def runs_path(out_dir: Path) -> Path:
    return Path(out_dir) / RUNS_FILE


def read_runs(path: Path) -> list[dict[str, Any]]:
    """Every complete record of a results file (none if it does not exist); a torn last line is left out."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # `tail` is b"" when the file ends with a newline
    records = []
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(complete) and not tail:
                continue  # a torn last line whose newline made it out (rare, still the last write)
            raise ResultsError(
                "not a JSON record; the results file was edited or is not from portfolio bench",
                file=str(path),
                line=number,
            ) from None
        if not isinstance(record, dict) or "run_id" not in record:
            raise ResultsError("a record without run_id", file=str(path), line=number)
        records.append(record)
    return records


def _cut_torn_tail(path: Path) -> None:
    """Truncate the file after its last complete, decodable line."""
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep:
        last_start = data.rfind(b"\n", 0, keep - 1) + 1
        try:
            json.loads(data[last_start:keep])
        except ValueError:
            keep = last_start
    if keep != len(data):
        with open(path, "r+b") as handle:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())


class RunLog(Resource):
    """Append-only writer: one line per record, flushed and fsync'ed before `append` returns."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            _cut_torn_tail(path)
        self.path = path
        self._handle: IO[str] = open(path, "a", encoding="utf-8")

    def append(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, sort_keys=True) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()
