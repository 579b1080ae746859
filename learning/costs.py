"""Learned action costs for the planners: base cost plus the price of the risk of failing.

    cost(a) = base_cost(a) + lam * -log(1 - p_fail(a))

Since -log(1 - p) summed over a plan is -log of the plan's probability that every step succeeds, with base costs
0 (or lam large) the cheapest plan is the most likely to succeed: the determinization of FF-Replan and its
family. With base costs the planner trades plan cost against risk, `lam` setting the rate (cost units per nat).

Nothing here trains: `action_costs` only calls `FailureModel.predict_proba`, one vectorised call for all
actions, so it can run on the planning hot path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from domains.model import GroundAction, Task, action_cost
from learning.model import FailureModel

# p_fail is clipped below 1 so that a cost is always finite: "very risky" must still be plannable when it is
# the only way to the goal.
MAX_P_FAIL = 1.0 - 1e-6


@dataclass(frozen=True)
class ActionCost:
    base_cost: float
    p_fail: float
    cost: float


def risk_cost(p_fail: float, lam: float = 1.0) -> float:
    """lam * -log(1 - p_fail): 0 for a sure action, growing without bound as p_fail -> 1."""
    return lam * -math.log1p(-min(max(p_fail, 0.0), MAX_P_FAIL))


def action_costs(
    model: FailureModel | None,
    task: Task,
    actions: Sequence[GroundAction],
    features: Mapping[str, Any] | None = None,
    lam: float = 1.0,
) -> dict[str, ActionCost]:
    """Cost of each grounded action, keyed by its PDDL form (`"(drive t1 a b)"`, as `PlanRequest.costs`).

    `model=None` (nothing learned yet) gives p_fail 0 and the task's own costs. Object types come from the task.
    """
    if model is None:
        p = [0.0] * len(actions)
    else:
        p = model.predict_proba(actions, features, object_types=task.objects()).tolist()
    out: dict[str, ActionCost] = {}
    for action, p_fail in zip(actions, p):
        base = action_cost(task, action)
        p_fail = min(max(float(p_fail), 0.0), MAX_P_FAIL)
        out[str(action)] = ActionCost(base_cost=base, p_fail=p_fail, cost=base + risk_cost(p_fail, lam))
    return out


def _key(step: GroundAction | str) -> str:
    if isinstance(step, GroundAction):
        return str(step)
    return "(" + " ".join(step.strip().strip("()").lower().split()) + ")"


def plan_success_probability(costs: Mapping[str, ActionCost], plan: Iterable[GroundAction | str]) -> float:
    """Probability that every step of `plan` succeeds: the product of (1 - p_fail), assuming independent steps.
    Steps may be `GroundAction`s or PDDL strings; a step without a cost entry raises KeyError."""
    probability = 1.0
    for step in plan:
        key = _key(step)
        if key not in costs:
            raise KeyError(f"no learned cost for {key}: compute action_costs() for every action of the plan")
        probability *= 1.0 - costs[key].p_fail
    return probability
