"""Steps as rows of the `steps` table and back: one writer and one reader for the table's format, shared by the
store (`traces.store`) and the JSONL import/export (`traces.jsonl`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from traces.records import StepRecord

STEP_COLUMNS = (
    "run_id", "step", "action", "args", "features", "outcome", "failure_category", "error", "duration_ms",
    "expected_effects", "observed_effects", "generation", "timestamp", "side_effects",
)  # fmt: skip


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)


def step_row(record: StepRecord) -> tuple:
    """A `StepRecord` as a row of the `steps` table, in `STEP_COLUMNS` order."""
    return (
        record.run_id,
        record.step,
        record.action,
        json.dumps(list(record.args), separators=(",", ":")),
        json.dumps(record.features, separators=(",", ":"), sort_keys=True),
        record.outcome,
        record.failure_category,
        record.error,
        record.duration_ms,
        _json(record.expected_effects),
        _json(record.observed_effects),
        record.generation,
        record.timestamp.isoformat().replace("+00:00", "Z") if record.timestamp else None,
        None if record.side_effects is None else int(record.side_effects),
    )


def row_step(row: Sequence[Any]) -> StepRecord:
    """The inverse of `step_row` (row in `STEP_COLUMNS` order)."""
    values = dict(zip(STEP_COLUMNS, row))
    for key in ("args", "features", "expected_effects", "observed_effects"):
        if values[key] is not None:
            values[key] = json.loads(values[key])
    if values["side_effects"] is not None:
        values["side_effects"] = bool(values["side_effects"])
    return StepRecord.model_validate({k: v for k, v in values.items() if v is not None})
