"""Offline training: read every step from the trace store in chunks, fit a `FailureModel`, measure it on a
time-ordered hold-out, and store it as the next model version. Never called on the planning hot path.

Models are stored as JSON data (`learning.storage`), never pickled: loading a model runs no code from the file.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from traces.errors import TraceStoreError

# What fitting imports on first use (prediction never does): 1-2 s the first time, which "trained in 0.0 s" on
# 24 steps had become "1.8 s" once these loaded inside the fit.
_FITTING_LIBRARIES = ("sklearn.linear_model", "sklearn.metrics", "scipy.optimize")

if TYPE_CHECKING:  # scikit-learn loads when a model is fit, not when `learning` is imported or a model read
    from learning.model import FailureModel
    from traces.store import TraceStore

log = logging.getLogger(__name__)

FORMAT = "portfolio-planner/failure-model/2"  # learning.storage's FORMAT_NAME and FORMAT_VERSION


class NoTrainingDataError(TraceStoreError, ValueError):
    """The trace store holds no steps to learn from."""


class ModelInfo(BaseModel):
    version: int
    created: str
    n_steps: int
    actions: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per action: steps, failures, prior kind, strength m"
    )
    metrics: dict[str, Any] = Field(default_factory=dict, description="held-out log loss, Brier, AUC")
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    train_seconds: float = 0.0
    changes: int = Field(default=0, description="changes of a grounding's failure rate found (`learning.changes`)")


def retrain(store: TraceStore, *, holdout_fraction: float = 0.2, chunk_size: int = 50_000, **params: Any) -> ModelInfo:
    """Fit a `FailureModel(**params)` on every step in `store` (oldest first) and save it as the next version.

    The newest `holdout_fraction` of steps is held out first to measure log loss, Brier score and AUC of a model
    trained on the older steps; the stored model is then trained on all steps.
    """
    from learning.durations import TIME_COLUMNS
    from learning.model import FailureModel
    from learning.storage import model_to_bytes

    n = store.count_steps()
    if n == 0:
        raise NoTrainingDataError(
            f"{store.path}: no steps recorded yet, nothing to train on. Import traces first "
            "(`portfolio traces import FILE.jsonl`) or run some plans with tracing on."
        )
    for name in _FITTING_LIBRARIES:  # loaded before the clock starts: `train_seconds` is the fit's, not imports'
        importlib.import_module(name)
    start = time.perf_counter()
    model = FailureModel(**params)
    durations = model.time_model()

    def chunks() -> Iterator[list[tuple]]:
        """The failure model's columns of each chunk (the four of a step, its run and its timestamp); the time
        model takes the chunk on the way (one read of the store for both; it reads `TIME_COLUMNS` and ignores
        the timestamp after them), and is fit once the last chunk is read, so that its steps are let go before
        the failure model's fit begins."""
        width = len(TIME_COLUMNS)
        for chunk in store.iter_step_chunks((*TIME_COLUMNS, "timestamp"), chunk_size=chunk_size):
            durations.add(chunk)
            yield list(map(itemgetter(0, 1, 2, 3, width - 1, width), chunk))
        durations.finish()

    model.fit_rows(chunks(), holdout_fraction=holdout_fraction, total_rows=n)
    model.durations_ = durations
    seconds = time.perf_counter() - start
    metadata: dict[str, Any] = {
        "format": FORMAT,
        "n_steps": model.n_steps_,
        "actions": model.action_counts(),
        "hyperparameters": model.get_params(),
        "changes": model.n_changes_,
        "holdout_fraction": holdout_fraction,
        "train_seconds": round(seconds, 3),
    }
    metrics = dict(model.holdout_metrics_)
    version = store.save_model(model_to_bytes(model), metadata, metrics)
    stored = store.latest_model()
    created = stored.created if stored is not None and stored.version == version else ""
    log.info("trained failure model v%d on %d steps in %.1f s", version, model.n_steps_, seconds)
    return ModelInfo(
        version=version, created=created, n_steps=model.n_steps_, actions=metadata["actions"], metrics=metrics,
        hyperparameters=metadata["hyperparameters"], train_seconds=round(seconds, 3), changes=model.n_changes_,
    )  # fmt: skip


def load_latest(store: TraceStore) -> FailureModel | None:
    """The newest stored model, or None if none was trained yet (callers then plan with base costs).
    `ModelFormatError`, naming the file, table and row, for a model this release does not read (a pickle from an
    older release, damage, metadata that is not JSON)."""
    from traces.errors import BadRowError

    try:
        stored = store.latest_model()
    except BadRowError as error:  # its metadata or metrics: the same remedy as for the model itself
        from learning.storage import ModelFormatError

        raise ModelFormatError(f"{error} Run `portfolio retrain` to store a model this release can read.") from None
    if stored is None:
        return None
    # Imported only now: the model's modules load numpy and scipy (~0.5 s), start-up that a store without a
    # model (a service's or a CLI's first run) has no use for.
    from learning.storage import ModelFormatError, model_from_bytes

    where = f"{store.path}: table models, version {stored.version}"
    model = model_from_bytes(bytes(stored.blob), where)
    if stored.metadata.get("format") not in (None, FORMAT):
        raise ModelFormatError(
            f"{where} has format {stored.metadata.get('format')!r}; expected {FORMAT!r}. "
            "Run `portfolio retrain` to train a model this release can read."
        )
    return model
