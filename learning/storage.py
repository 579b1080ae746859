"""A fitted `FailureModel` as data: JSON bytes with a format number, never pickle.

    blob = model_to_bytes(model)          # what `retrain` hands to TraceStore.save_model
    model = model_from_bytes(blob)        # what `load_latest` reads back

The JSON holds the hyperparameters, and per action name the prior's weights (token -> number) and intercept,
the fitted strength m, and each grounding's recency-weighted counts and out-of-fold prior. Loading parses JSON,
checks it against one pydantic model of the document (`StoredModel`: every field's type and range, so a
hand-edited or damaged model is a `ModelFormatError` naming the field, never a crash at prediction time) and
builds dataclasses: nothing in the file is executed. Models written by releases that pickled them (the
blob starts with the pickle opcode 0x80) are refused with `ModelFormatError`, naming the fix: `portfolio
retrain` rebuilds the model from the traces, which are the real record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from learning.action_model import ActionModel
from learning.durations import DurationFit, TimeAction, TimeModel
from learning.model import FailureModel
from traces.errors import BadRowError

FORMAT_VERSION = 2
FORMAT_NAME = "portfolio-planner/failure-model"
_PARAMS = ("half_life_steps", "prior_mean", "prior_strength", "min_samples", "C", "tolerance", "trust_steps")
_OPTIONAL_PARAMS = ("outliers", "stale_half_life", "change_odds")  # a model stored without them: the defaults


class ModelFormatError(BadRowError):
    """A stored model this release cannot (or will not) read."""


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Finite = Annotated[float, AfterValidator(_finite)]
Count = Annotated[float, Field(ge=0), AfterValidator(_finite)]  # a (recency-weighted) number of steps
Probability = Annotated[float, Field(ge=0, le=1)]
_STRICT = ConfigDict(strict=True, extra="forbid")


class StoredParams(BaseModel):
    """`FailureModel`'s hyperparameters, in the ranges its `__init__` documents."""

    model_config = _STRICT
    half_life_steps: Annotated[float, Field(gt=0), AfterValidator(_finite)] | None
    prior_mean: Annotated[float, Field(gt=0, lt=1)]
    prior_strength: Annotated[float, Field(gt=0), AfterValidator(_finite)]
    min_samples: Annotated[int, Field(ge=0)]
    C: Annotated[float, Field(gt=0), AfterValidator(_finite)]
    tolerance: Annotated[float, Field(gt=0, lt=1)]
    trust_steps: Annotated[float, Field(gt=0), AfterValidator(_finite)]
    outliers: bool = True
    stale_half_life: Annotated[float, Field(gt=0), AfterValidator(_finite)] | None = 2.0
    change_odds: Annotated[float, Field(gt=1), AfterValidator(_finite)] | None = 20.0


class StoredAction(BaseModel):
    """One action name's `ActionModel`. `strength` (m, pseudo-steps) must be positive: 0 divides by zero in
    the posterior and a negative one flips it."""

    model_config = _STRICT
    kind: Literal["logistic", "rate"]
    strength: Annotated[float, Field(gt=0), AfterValidator(_finite)]
    base_rate: Probability
    intercept: Finite = 0.0
    weights: dict[str, Finite] = Field(default_factory=dict)
    # cell -> [n_w, f_w, prior, steps, failures]
    cells: dict[str, tuple[Count, Count, Probability, Count, Count]] = Field(default_factory=dict)
    evidence: dict[str, tuple[Count, Count]] = Field(default_factory=dict)  # token -> [steps, failures]
    groundings: dict[str, tuple[Count, Count, Probability]] = Field(default_factory=dict)
    n_steps: Annotated[int, Field(ge=0)] = 0
    n_failures: Annotated[int, Field(ge=0)] = 0
    outlier_share: Probability = 0.0
    # cell -> [the probability that its kin group is an outlier, the group's pooled rate] (absent before it was fit)
    outlier: dict[str, tuple[Probability, Probability]] = Field(default_factory=dict)
    # cell -> [steps since its last change, failures since, runs since last seen, changes, staleness weight]
    recent: dict[str, tuple[Count, Count, Count, Count, Probability]] = Field(default_factory=dict)
    last_seen: dict[str, Annotated[str, Field(max_length=64)]] = Field(default_factory=dict)
    # kin key -> [probability that it shares a sibling's change, steps, failures of the change's common rate]
    shared: dict[str, tuple[Probability, Count, Count]] = Field(default_factory=dict)


class StoredDurationFit(BaseModel):
    """One outcome's durations of one action name (`learning.durations.DurationFit`)."""

    model_config = _STRICT
    strength: Annotated[float, Field(gt=0), AfterValidator(_finite)]
    base_ms: Count
    intercept: Finite = 0.0
    weights: dict[str, Finite] = Field(default_factory=dict)
    cells: dict[str, tuple[Count, Count, Count, Count]] = Field(default_factory=dict)  # [n_w, mean, prior, var]


class StoredTimeAction(BaseModel):
    """One action name's `learning.durations.TimeAction`."""

    model_config = _STRICT
    success: StoredDurationFit | None
    failure: StoredDurationFit | None
    shares: tuple[Probability, Probability, Probability]
    share_strengths: tuple[Count, Count, Count]
    cells: dict[str, tuple[Count, Count, Count, Count, Count, Count, Count]] = Field(default_factory=dict)


class StoredTimeModel(BaseModel):
    """`learning.durations.TimeModel`: absent in models stored before durations were learned."""

    model_config = _STRICT
    default_ms: Count
    replan_ms: Count
    timed_steps: Annotated[int, Field(ge=0)] = 0
    actions: dict[str, StoredTimeAction] = Field(default_factory=dict)


class StoredModel(BaseModel):
    """The whole stored document (`model_to_dict`)."""

    model_config = _STRICT
    format: Literal["portfolio-planner/failure-model"]
    format_version: Literal[2]
    params: StoredParams
    n_steps: Annotated[int, Field(ge=0)] = 0
    holdout_metrics: dict[str, int | Finite | None] = Field(default_factory=dict)
    actions: dict[str, StoredAction]
    unseen_rate: Probability | None = None  # absent in models stored before it was learned: prior_mean then
    n_runs: Annotated[int, Field(ge=0)] = 0
    n_changes: Annotated[int, Field(ge=0)] = 0
    durations: StoredTimeModel | None = None


def _field_errors(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"]) or "document"
        parts.append(f"{where}: {item['msg']} (got {item.get('input')!r:.40})")
    more = len(error.errors()) - 3
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def model_to_dict(model: FailureModel) -> dict[str, Any]:
    model._check_fitted()
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "params": {key: getattr(model, key) for key in _PARAMS + _OPTIONAL_PARAMS},
        "n_steps": int(getattr(model, "n_steps_", 0)),
        "holdout_metrics": getattr(model, "holdout_metrics_", {}),
        "actions": {name: vars(action) for name, action in model.actions_.items()},
        "unseen_rate": getattr(model, "unseen_rate_", None),
        "n_runs": int(getattr(model, "n_runs_", 0)),
        "n_changes": int(getattr(model, "n_changes_", 0)),
        **_time_dict(getattr(model, "durations_", None)),
    }


def _time_dict(durations: TimeModel | None) -> dict[str, Any]:
    """The `durations` entry (none for a model fit without them, so its document has no `durations` key)."""
    if durations is None:
        return {}
    return {"durations": {
        "default_ms": durations.default_ms, "replan_ms": durations.replan_ms, "timed_steps": durations.timed_steps,
        "actions": {name: _time_action_dict(action) for name, action in durations.actions.items()},
    }}  # fmt: skip


def _time_action_dict(action: TimeAction) -> dict[str, Any]:
    """`dataclasses.asdict` of a `TimeAction` without its deep copy (the dictionary is only written out)."""
    fits = {
        key: None if fit is None else vars(fit)
        for key, fit in (("success", action.success), ("failure", action.failure))
    }
    return {**fits, "shares": action.shares, "share_strengths": action.share_strengths, "cells": action.cells}


def model_to_bytes(model: FailureModel) -> bytes:
    return json.dumps(model_to_dict(model), separators=(",", ":"), allow_nan=False).encode()


def model_from_bytes(blob: bytes, where: str = "model") -> FailureModel:
    """Parse a stored model; `ModelFormatError` (with what to do) for pickles, damage, a document nested past
    Python's stack, or a newer format. `where` names the row in messages."""
    if blob[:1] == b"\x80":
        raise ModelFormatError(
            f"{where} was stored as a Python pickle by an older release; this release never loads pickles "
            "(unpickling can run code). Run `portfolio retrain` to rebuild the model from the traces."
        )
    try:
        data = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFormatError(f"{where} is not a JSON failure model ({error}); run `portfolio retrain`.") from None
    except RecursionError:  # a document nested past Python's stack: no model is (a few levels are)
        raise ModelFormatError(
            f"{where} is nested deeper than a failure model ever is (not one this release wrote); "
            "run `portfolio retrain`."
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"{where} is not a {FORMAT_NAME} document; run `portfolio retrain`.")
    if data.get("format_version") != FORMAT_VERSION:
        raise ModelFormatError(
            f"{where} has format version {data.get('format_version')!r}; this release reads {FORMAT_VERSION}. "
            "Run `portfolio retrain` with this release."
        )
    try:
        stored = StoredModel.model_validate_json(blob)  # JSON mode: arrays for the tuples, no "5" for 5
    except ValidationError as error:
        raise ModelFormatError(
            f"{where} has a malformed field: {_field_errors(error)}; run `portfolio retrain` "
            "to rebuild it from the traces."
        ) from None
    params = stored.params.model_dump()
    model = FailureModel(**params)
    model.actions_ = {name: ActionModel(**_plain(action)) for name, action in stored.actions.items()}
    model.n_steps_ = stored.n_steps
    model.unseen_rate_ = stored.unseen_rate
    model.n_runs_, model.n_changes_ = stored.n_runs, stored.n_changes
    model.holdout_metrics_ = dict(stored.holdout_metrics)
    model.durations_ = _time_model(stored.durations, model) if stored.durations is not None else None
    return model


def _time_model(stored: StoredTimeModel, model: FailureModel) -> TimeModel:
    durations = model.time_model()
    durations.default_ms, durations.replan_ms = stored.default_ms, stored.replan_ms
    durations.timed_steps = stored.timed_steps
    for name, action in stored.actions.items():
        fits = [
            None if fit is None else DurationFit(**{**fit.model_dump(), "cells": _lists(fit.cells)})
            for fit in (action.success, action.failure)
        ]
        durations.actions[name] = TimeAction(
            fits[0], fits[1], list(action.shares), list(action.share_strengths),
            _lists(action.cells),
        )  # fmt: skip
    return durations


def _lists(cells: Mapping[str, tuple[float, ...]]) -> dict[str, list[float]]:
    return {key: list(values) for key, values in cells.items()}


def _plain(action: StoredAction) -> dict[str, Any]:
    """An `ActionModel`'s fields as it keeps them (lists, not the tuples the check uses)."""
    fields = action.model_dump()
    for key in ("cells", "evidence", "groundings", "outlier", "recent", "shared"):
        fields[key] = {name: list(values) for name, values in fields[key].items()}
    return fields
