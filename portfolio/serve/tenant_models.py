"""The failure models a process of the service keeps, one per tenant (`traces.tenants`), the most recently used
`size` of them.

    models = TenantModels(store)
    version, model = models.get("acme", generation=12)   # (None, None): the tenant has no model yet

`generation` is the newest model version of the whole store, which the server sends with every call: while it
is the one a tenant's model was last checked at, the cached model is answered without a query; when it has
moved (a retrain of any tenant), the tenant's own newest version is read (one indexed query) and its model
loaded again only if that changed. So a retrain reaches every worker without a broadcast, and a tenant's model
is not parsed again because another tenant's was retrained. A model that cannot be read raises from `get`
(`learning.storage.ModelFormatError`), each time until a readable one is stored.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from learning.model import FailureModel
    from traces.store import TraceStore

MAX_MODELS = 16  # a model of a busy tenant is a few MB parsed; a worker keeps this many tenants' at most


@dataclass
class _Loaded:
    checked: Any  # the store's generation when the version was last read
    version: int | None
    model: FailureModel | None


class TenantModels:
    """Each tenant's newest failure model, loaded on first use and kept for the `size` tenants used last."""

    def __init__(self, store: TraceStore, size: int = MAX_MODELS) -> None:
        self.store = store
        self.size = size
        self._loaded: OrderedDict[str, _Loaded] = OrderedDict()

    def get(self, tenant: str, generation: Any = None) -> tuple[int | None, FailureModel | None]:
        """The tenant's newest model and its version ((None, None) before its first retrain)."""
        loaded = self._loaded.get(tenant)
        if loaded is not None and loaded.checked == generation:
            self._loaded.move_to_end(tenant)
            return loaded.version, loaded.model
        version = self.store.latest_model_version(tenant)
        if loaded is None or loaded.version != version:
            from learning.retrain import load_latest

            model = load_latest(self.store, tenant) if version is not None else None
            loaded = _Loaded(generation, version, model)
        loaded.checked = generation
        self._loaded[tenant] = loaded
        self._loaded.move_to_end(tenant)
        while len(self._loaded) > self.size:
            self._loaded.popitem(last=False)
        return loaded.version, loaded.model

    def __len__(self) -> int:
        return len(self._loaded)
