"""Learning from execution traces: per-action failure models and the action costs they imply.

    info = retrain(TraceStore("traces.db"))            # offline, stores model version info.version
    model = load_latest(store)                        # None before the first retrain
    costs = action_costs(model, task, grounded_actions, features={"weather": "rain"})

Depends on `traces` and `domains`, never on `portfolio`.
"""

from learning.costs import ActionCost, action_costs, plan_success_probability, risk_cost
from learning.model import FailureModel
from learning.retrain import ModelInfo, NoTrainingDataError, load_latest, retrain

__all__ = [
    "ActionCost",
    "FailureModel",
    "ModelInfo",
    "NoTrainingDataError",
    "action_costs",
    "load_latest",
    "plan_success_probability",
    "retrain",
    "risk_cost",
]
