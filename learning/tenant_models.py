"""One failure model per tenant: what a retrain of a store shared by tenants fits.

    infos = retrain_tenants(store)                 # {"acme": ModelInfo, "default": ModelInfo, ...}
    infos = retrain_tenants(store, pooled=True)    # {"*": ModelInfo}: one model of every tenant's steps
    model = load_latest(store, "acme")             # `learning.retrain.load_latest`

A tenant's model is fit on its own steps alone (`traces.tenants`), so what one tenant records, true or
fabricated, moves no other tenant's costs. Pooling every tenant's steps into one model (`pooled`; `portfolio
serve --pool-learning`) lets tenants that share the world learn from each other; it is for operators who trust
them all, and the poison guard (`learning.guard`) is then all that stands between a tenant and the others'
costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from traces.tenants import POOLED, tenants_with_steps

if TYPE_CHECKING:
    from learning.retrain import ModelInfo
    from traces.store import TraceStore


def retrain_tenants(
    store: TraceStore, tenants: Sequence[str] | None = None, *, pooled: bool = False, **options: Any
) -> dict[str, ModelInfo]:
    """Fit and store the next model of each tenant in `tenants` (None: every tenant with steps) or, `pooled`,
    the one model of every tenant's steps (keyed `traces.tenants.POOLED`). `options` go to
    `learning.retrain.retrain` (the model's parameters, `guard`, `include_held`). A tenant without steps gets
    no model; `NoTrainingDataError` when none has any.

    Of several tenants, one whose model stands (no step of it recorded since, nothing held back, the same
    parameters) is not fit again: the fit would give the same model. Its `ModelInfo` is the stored model's,
    `unchanged`. So a retrain of a store of many tenants costs the fits of those that recorded steps."""
    from learning.retrain import NoTrainingDataError, retrain

    chosen = [POOLED] if pooled else list(tenants if tenants is not None else tenants_with_steps(store))
    infos: dict[str, ModelInfo] = {}
    for tenant in chosen:
        standing = _standing(store, tenant, options) if len(chosen) > 1 else None
        if standing is not None:
            infos[tenant] = standing
            continue
        try:
            infos[tenant] = retrain(store, tenant=tenant, **options)
        except NoTrainingDataError:
            if len(chosen) == 1:
                raise
    if not infos:
        raise NoTrainingDataError(f"{store.path}: no steps recorded yet, nothing to train on.")
    return infos


def _standing(store: TraceStore, tenant: str, options: dict[str, Any]) -> ModelInfo | None:
    """The tenant's stored model as a `ModelInfo` (`unchanged`) if a fit with `options` would give it again."""
    from learning.model import FailureModel
    from learning.retrain import ModelInfo

    stored = store.latest_model(tenant)
    if stored is None:
        return None
    metadata = stored.metadata
    params = {k: v for k, v in options.items() if k not in ("guard", "include_held", "holdout_fraction", "chunk_size")}
    if (
        "through" not in metadata
        or metadata.get("held")
        or metadata.get("hyperparameters") != FailureModel(**params).get_params()
    ):
        return None
    if store.count_steps(tenant=tenant) != metadata.get("n_steps"):  # steps are never deleted: new ones came
        return None
    return ModelInfo(
        version=stored.version, created=stored.created, n_steps=metadata.get("n_steps", 0),
        actions=metadata.get("actions", {}), metrics=stored.metrics, hyperparameters=metadata["hyperparameters"],
        train_seconds=0.0, changes=metadata.get("changes", 0), tenant=tenant, unchanged=True,
    )  # fmt: skip
