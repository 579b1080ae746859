"""Learning from execution traces: per-action failure models and the action costs they imply.

    info = retrain(TraceStore("traces.db"))            # offline, stores model version info.version
    model = load_latest(store)                        # None before the first retrain
    costs = action_costs(model, task, grounded_actions, features={"weather": "rain"}, explore="thompson")
    retrain_selection(store); load_selection(store).predict(task.domain_fingerprint, operators)  # searches to race

Depends on `traces` and `domains`, never on `portfolio`. Names are imported on first use (PEP 562), so that
`learning.explore`'s policy names (the CLI's `--explore` choices) cost no numpy, scipy, scikit-learn or trace
store import: `portfolio plan` without a model never loads them.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_WHERE = {
    "ActionCost": "costs", "action_costs": "costs", "action_posteriors": "costs",
    "plan_success_probability": "costs", "priced": "costs", "risk_cost": "costs",
    "DEFAULT_EXPLORE": "explore", "EXPLORE_POLICIES": "explore", "explore_p_fail": "explore",
    "FailureModel": "model", "TimeModel": "durations",
    "OBJECTIVES": "objective", "ObjectiveError": "objective", "TimeParams": "objective", "check_objective": "objective",
    "ModelFormatError": "storage", "model_from_bytes": "storage", "model_to_bytes": "storage",
    "SelectionModel": "selection", "load_selection": "selection", "retrain_selection": "selection",
    "ModelInfo": "retrain", "NoTrainingDataError": "retrain", "load_latest": "retrain", "retrain": "retrain",
}  # fmt: skip

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'learning' has no attribute {name!r}")
    return getattr(importlib.import_module(f"learning.{_WHERE[name]}"), name)


class _Package(types.ModuleType):
    """`learning.retrain` is the function, as `from learning import retrain` has always given, also once the
    submodule of that name is imported: the import system's binding of the submodule to the package is turned
    into a binding of its function (the submodule stays in `sys.modules` for `from learning.retrain import ...`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "retrain" and isinstance(value, types.ModuleType):
            value = value.retrain
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
