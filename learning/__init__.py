"""Learning from execution traces: per-action failure models and the action costs they imply.

    info = retrain(TraceStore("traces.db"))            # offline, stores model version info.version
    model = load_latest(store)                        # None before the first retrain
    costs = action_costs(model, task, grounded_actions, features={"weather": "rain"}, explore="thompson")
    retrain_selection(store); load_selection(store).predict(task.domain_fingerprint, operators)  # searches to race

Depends on `traces` and `domains`, never on `portfolio`. Names are imported on first use (PEP 562), so that
`learning.explore`'s policy names cost the planner no scikit-learn import when it has no model.
"""

from __future__ import annotations

import importlib
from typing import Any

# Eager (and cheap: scikit-learn loads inside): binds `learning.retrain` to the function, not the submodule.
from learning.retrain import ModelInfo as ModelInfo
from learning.retrain import NoTrainingDataError as NoTrainingDataError
from learning.retrain import load_latest as load_latest
from learning.retrain import retrain as retrain

_WHERE = {
    "ActionCost": "costs", "action_costs": "costs", "action_posteriors": "costs",
    "plan_success_probability": "costs", "priced": "costs", "risk_cost": "costs",
    "DEFAULT_EXPLORE": "explore", "EXPLORE_POLICIES": "explore", "explore_p_fail": "explore",
    "FailureModel": "model", "TimeModel": "durations",
    "OBJECTIVES": "objective", "ObjectiveError": "objective", "TimeParams": "objective", "check_objective": "objective",
    "ModelFormatError": "storage", "model_from_bytes": "storage", "model_to_bytes": "storage",
    "SelectionModel": "selection", "load_selection": "selection", "retrain_selection": "selection",
}  # fmt: skip

__all__ = sorted([*_WHERE, "ModelInfo", "NoTrainingDataError", "load_latest", "retrain"])


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'learning' has no attribute {name!r}")
    return getattr(importlib.import_module(f"learning.{_WHERE[name]}"), name)
