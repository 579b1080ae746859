"""Learning from execution traces: per-action failure models and the action costs they imply.

    info = retrain(TraceStore("traces.db"))            # offline, stores model version info.version
    model = load_latest(store)                        # None before the first retrain
    costs = action_costs(model, task, grounded_actions, features={"weather": "rain"}, explore="thompson")

Depends on `traces` and `domains`, never on `portfolio`.
"""

from learning.costs import ActionCost, action_costs, action_posteriors, plan_success_probability, priced, risk_cost
from learning.explore import DEFAULT_EXPLORE, EXPLORE_POLICIES, explore_p_fail
from learning.model import FailureModel
from learning.retrain import ModelInfo, NoTrainingDataError, load_latest, retrain
from learning.storage import ModelFormatError, model_from_bytes, model_to_bytes

__all__ = [
    "DEFAULT_EXPLORE",
    "EXPLORE_POLICIES",
    "ActionCost",
    "FailureModel",
    "ModelFormatError",
    "ModelInfo",
    "NoTrainingDataError",
    "action_costs",
    "action_posteriors",
    "explore_p_fail",
    "load_latest",
    "model_from_bytes",
    "model_to_bytes",
    "plan_success_probability",
    "priced",
    "retrain",
    "risk_cost",
]
