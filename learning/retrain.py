"""Offline training: read a tenant's steps from the trace store in chunks (`traces.tenants`; the default
tenant's are all the CLI and the Python API record), hold back what the poison guard finds (`learning.guard`),
fit a `FailureModel`, measure it on a time-ordered hold-out, and store it as the tenant's next model version.
Never called on the planning hot path. `learning.tenant_models` retrains every tenant.

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

from learning.guard import HeldBatch
from traces.errors import TraceStoreError
from traces.tenants import DEFAULT_TENANT

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
    tenant: str = Field(default=DEFAULT_TENANT, description="whose steps it was fit on (`traces.tenants`)")
    held: list[HeldBatch] = Field(
        default_factory=list, description="batches the poison guard held back from the fit (`learning.guard`)"
    )
    unchanged: bool = Field(
        default=False, description="not fit again: no step of the tenant recorded since (`learning.tenant_models`)"
    )


def retrain(
    store: TraceStore,
    *,
    holdout_fraction: float = 0.2,
    chunk_size: int = 50_000,
    tenant: str = DEFAULT_TENANT,
    guard: bool = True,
    include_held: bool = False,
    **params: Any,
) -> ModelInfo:
    """Fit a `FailureModel(**params)` on `tenant`'s steps in `store` (oldest first; `traces.tenants`: the
    default tenant's are every step the CLI and the Python API record, `POOLED` every tenant's) and save it as
    the tenant's next version.

    With `guard`, the steps recorded since the tenant's last model are reviewed first (`learning.guard`): a
    batch of one principal that departs sharply from that model, with no other source agreeing, is held back
    from the fit (kept in the store, listed in `ModelInfo.held`, reviewed again next time); `include_held`
    fits the batches the last model held back regardless.

    The newest `holdout_fraction` of steps is held out first to measure log loss, Brier score and AUC of a model
    trained on the older steps; the stored model is then trained on all steps.
    """
    from learning.durations import TIME_COLUMNS
    from learning.guard import Review, review_steps
    from learning.model import FailureModel
    from learning.storage import model_to_bytes

    through = store.last_step_id()
    n = store.count_steps(tenant=tenant, through=through)
    if n == 0:
        whose = "" if tenant == DEFAULT_TENANT else f" of tenant {tenant!r}"
        raise NoTrainingDataError(
            f"{store.path}: no steps{whose} recorded yet, nothing to train on. Import traces first "
            "(`portfolio traces import FILE.jsonl`) or run some plans with tracing on."
        )
    for name in _FITTING_LIBRARIES:  # loaded before the clock starts: `train_seconds` is the fit's, not imports'
        importlib.import_module(name)
    start = time.perf_counter()
    review = review_steps(store, tenant, through, include_held=include_held) if guard else Review()
    held = review.held_ids
    n -= len(held)
    model = FailureModel(**params)
    durations = model.time_model()

    def chunks() -> Iterator[list[tuple]]:
        """The failure model's columns of each chunk (the four of a step, its run and its timestamp); the time
        model takes the chunk on the way (one read of the store for both; it reads `TIME_COLUMNS` and ignores
        the columns after them), and is fit once the last chunk is read, so that its steps are let go before
        the failure model's fit begins. Held steps (their id read last) are left out."""
        width = len(TIME_COLUMNS)
        columns = (*TIME_COLUMNS, "timestamp", "id") if held else (*TIME_COLUMNS, "timestamp")
        for chunk in store.iter_step_chunks(columns, chunk_size=chunk_size, tenant=tenant, through=through):
            if held:
                chunk = [row for row in chunk if row[-1] not in held]
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
        "tenant": tenant,
        "through": through,  # the newest step id this model has seen: the guard's next review starts after it
        "held": review.metadata(),
    }
    metrics = dict(model.holdout_metrics_)
    version = store.save_model(model_to_bytes(model), metadata, metrics, tenant=tenant)
    stored = store.latest_model(tenant)
    created = stored.created if stored is not None and stored.version == version else ""
    log.info(
        "trained failure model v%d of tenant %r on %d steps in %.1f s (%d held back)",
        version, tenant, model.n_steps_, seconds, len(held),
    )  # fmt: skip
    return ModelInfo(
        version=version, created=created, n_steps=model.n_steps_, actions=metadata["actions"], metrics=metrics,
        hyperparameters=metadata["hyperparameters"], train_seconds=round(seconds, 3), changes=model.n_changes_,
        tenant=tenant, held=review.held,
    )  # fmt: skip


def load_latest(store: TraceStore, tenant: str = DEFAULT_TENANT) -> FailureModel | None:
    """The newest stored model of `tenant` (`traces.tenants`), or None if none was trained yet (callers then plan
    with base costs). `ModelFormatError`, naming the file, table and row, for a model this release does not read
    (a pickle from an older release, damage, metadata that is not JSON)."""
    from traces.errors import BadRowError

    try:
        stored = store.latest_model(tenant)
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
