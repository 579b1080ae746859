"""scikit-learn's parameter conventions for this package's estimators, without importing scikit-learn.

An estimator's parameters are the arguments of its `__init__`, each kept as an attribute of the same name (no
hidden state); `get_params`, `set_params` and the repr follow from that, as `sklearn.base.BaseEstimator` gives
them. Not `BaseEstimator` itself: importing scikit-learn takes ~1.5 s, which every CLI call and service worker
with a stored model paid before its first plan (prediction needs only numpy and scipy.special).
"""

from __future__ import annotations

import inspect
from typing import Any


class Params:
    """`get_params`, `set_params` and a repr of the parameters that differ from their defaults."""

    @classmethod
    def _param_defaults(cls) -> dict[str, Any]:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        return {p.name: p.default for p in parameters}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The `__init__` parameters by name (`deep` is accepted for scikit-learn's signature: nothing nests)."""
        return {name: getattr(self, name) for name in self._param_defaults()}

    def set_params(self, **params: Any) -> Any:
        """Set `__init__` parameters by name; an unknown name is an error, as in scikit-learn."""
        names = self._param_defaults()
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise ValueError(f"invalid parameter(s) {unknown} for {type(self).__name__}; valid: {', '.join(names)}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        changed = [f"{n}={getattr(self, n)!r}" for n, d in self._param_defaults().items() if getattr(self, n) != d]
        return f"{type(self).__name__}({', '.join(changed)})"
