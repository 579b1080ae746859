"""A fitted `FailureModel` as data: JSON bytes with a format number, never pickle.

    blob = model_to_bytes(model)          # what `retrain` hands to TraceStore.save_model
    model = model_from_bytes(blob)        # what `load_latest` reads back

The JSON holds the hyperparameters, and per action name the prior's weights (token -> number) and intercept,
the fitted strength m, and each grounding's recency-weighted counts and out-of-fold prior. Loading parses JSON
and builds dataclasses: nothing in the file is executed. Models written by releases that pickled them (the
blob starts with the pickle opcode 0x80) are refused with `ModelFormatError`, naming the fix: `portfolio
retrain` rebuilds the model from the traces, which are the real record.
"""

from __future__ import annotations

import json
from typing import Any

from learning.model import ActionModel, FailureModel
from traces.errors import TraceStoreError

FORMAT_VERSION = 2
FORMAT_NAME = "portfolio-planner/failure-model"
_PARAMS = ("half_life_steps", "prior_mean", "prior_strength", "min_samples", "C", "tolerance", "trust_steps")
_OPTIONAL_PARAMS = ("outliers",)  # added later: a model stored without them gets the default


class ModelFormatError(TraceStoreError, ValueError):
    """A stored model this release cannot (or will not) read."""


def model_to_dict(model: FailureModel) -> dict[str, Any]:
    model._check_fitted()
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "params": {key: getattr(model, key) for key in _PARAMS + _OPTIONAL_PARAMS},
        "n_steps": int(getattr(model, "n_steps_", 0)),
        "holdout_metrics": getattr(model, "holdout_metrics_", {}),
        "actions": {name: vars(action) for name, action in model.actions_.items()},
    }


def model_to_bytes(model: FailureModel) -> bytes:
    return json.dumps(model_to_dict(model), separators=(",", ":"), allow_nan=False).encode()


def model_from_bytes(blob: bytes, where: str = "model") -> FailureModel:
    """Parse a stored model; `ModelFormatError` (with what to do) for pickles, damage or a newer format."""
    if blob[:1] == b"\x80":
        raise ModelFormatError(
            f"{where} was stored as a Python pickle by an older release; this release never loads pickles "
            "(unpickling can run code). Run `portfolio retrain` to rebuild the model from the traces."
        )
    try:
        data = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFormatError(f"{where} is not a JSON failure model ({error}); run `portfolio retrain`.") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"{where} is not a {FORMAT_NAME} document; run `portfolio retrain`.")
    if data.get("format_version") != FORMAT_VERSION:
        raise ModelFormatError(
            f"{where} has format version {data.get('format_version')!r}; this release reads {FORMAT_VERSION}. "
            "Run `portfolio retrain` with this release."
        )
    try:
        params = {key: data["params"][key] for key in _PARAMS}
        params |= {key: data["params"][key] for key in _OPTIONAL_PARAMS if key in data["params"]}
        model = FailureModel(**params)
        model.actions_ = {name: ActionModel(**fields) for name, fields in data["actions"].items()}
    except (KeyError, TypeError) as error:
        raise ModelFormatError(f"{where} is missing or has malformed fields ({error}); run `portfolio retrain`.") \
            from error
    model.n_steps_ = int(data.get("n_steps", 0))
    model.holdout_metrics_ = dict(data.get("holdout_metrics") or {})
    return model
