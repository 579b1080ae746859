"""CSV import of step records: a header row naming `StepRecord` fields, one step per row (a spreadsheet's or a
log query's export).

    run_id,step,action,outcome,duration_ms,features
    r1,0,(drive t1 a b),success,1200,"{""weather"": ""rain""}"
    r1,1,unload,failure,,

- `action` is the plan's spelling, `(drive t1 a b)`, or a name with the objects in `args` (space-separated, or
  a JSON list);
- `features`, `expected_effects` and `observed_effects` are JSON (an object, lists of atoms); a column that is
  no field of a step is a feature of it (`weather` with `rain`), read as a number or true/false where it is one;
- an empty cell is a field left out.

Rows are checked as JSONL lines are (`traces.jsonl`): a bad row is reported with its line number (the file's,
counting a quoted value's line breaks) and what was wrong.
"""

from __future__ import annotations

import csv
import json
from typing import Any

from pydantic import ValidationError

from traces.errors import TraceImportError
from traces.records import StepRecord

JSON_COLUMNS = frozenset({"features", "expected_effects", "observed_effects"})


def _scalar(text: str) -> Any:
    """A feature cell: an integer, a number, true/false, else the text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_row(row: dict[str, str], fields: frozenset[str]) -> StepRecord:
    """One CSV row (header name -> cell) -> StepRecord; raises ValueError with a short reason."""
    data: dict[str, Any] = {}
    features: dict[str, Any] = {}
    for name, cell in row.items():
        if name is None:
            raise ValueError(f"more cells than the header has columns ({len(row[name])} extra)")
        if cell is None or cell == "":
            continue
        if name in JSON_COLUMNS:
            try:
                data[name] = json.loads(cell)
            except json.JSONDecodeError as error:
                raise ValueError(f"{name}: not valid JSON ({error.msg})") from None
        elif name == "args":
            data[name] = json.loads(cell) if cell.lstrip().startswith("[") else cell.split()
        elif name in fields:
            data[name] = cell
        else:
            features[name] = _scalar(cell)
    if features:
        data["features"] = {**features, **(data.get("features") or {})}
    try:
        return StepRecord.model_validate(data)
    except ValidationError as error:
        raise ValueError(
            "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'row'}: {e['msg']}" for e in error.errors())
        ) from None


def read_csv_numbered(path: str) -> tuple[list[StepRecord], list[int], list[tuple[int, str]]]:
    """The good records of a CSV file of steps with their line numbers, and `(line number, reason)` of each bad
    row. Raises TraceImportError when the file cannot be read as UTF-8 text or has no header."""
    records: list[StepRecord] = []
    numbers: list[int] = []
    problems: list[tuple[int, str]] = []
    fields = frozenset(StepRecord.model_fields)
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames:
                raise TraceImportError(path, [(1, "no header row; expected column names such as run_id,step,action")])
            missing = {"run_id", "step", "action"} - set(reader.fieldnames)
            if missing:
                raise TraceImportError(path, [(1, f"the header lacks {', '.join(sorted(missing))}")])
            start = reader.line_num + 1
            for row in reader:
                try:
                    records.append(parse_row(row, fields))
                    numbers.append(start)
                except ValueError as error:
                    problems.append((start, str(error)))
                start = reader.line_num + 1
    except UnicodeDecodeError as error:
        raise TraceImportError(path, [(0, f"not UTF-8 text ({error.reason} at byte {error.start})")]) from None
    except csv.Error as error:
        raise TraceImportError(path, [(0, f"not a CSV file ({error})")]) from None
    except OSError as error:
        raise TraceImportError(path, [(0, f"cannot read the file ({error.strerror})")]) from None
    return records, numbers, problems
