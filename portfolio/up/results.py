"""Between the cascade's answers and unified-planning's: statuses, plans and metrics, both ways.

Pure functions over a `PlanResult` and the names of a UP problem read into a task (`domains.up_bridge.UpTask`):
what `portfolio.up.engine` hands back to UP, and how a UP plan becomes steps the project's validator reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from unified_planning.engines.results import PlanGenerationResultStatus as UpStatus
from unified_planning.model.metrics import MinimizeActionCosts, MinimizeSequentialPlanLength
from unified_planning.plans import ActionInstance, SequentialPlan

from domains.model import GroundAction, Plan, Task
from portfolio.engine.results import PlanResult, Status
from portfolio.planner import TASK_COSTS

# The cascade's statuses follow UP's taxonomy (`portfolio.engine.results`); SOLVED is refined by `proved_optimal`.
STATUSES: dict[Status, UpStatus] = {
    Status.SOLVED: UpStatus.SOLVED_SATISFICING,
    Status.UNSOLVABLE: UpStatus.UNSOLVABLE_PROVEN,  # a complete method proved it
    Status.INCOMPLETE: UpStatus.UNSOLVABLE_INCOMPLETELY,  # an incomplete search ran out of states
    Status.UNSUPPORTED: UpStatus.UNSUPPORTED_PROBLEM,
    Status.MEMOUT: UpStatus.MEMOUT,
    Status.TIMEOUT: UpStatus.TIMEOUT,
    Status.ERROR: UpStatus.INTERNAL_ERROR,
}


def proved_optimal(result: PlanResult, task: Task, problem: Any) -> bool:
    """Whether `result`'s plan is proved optimal for the problem's own quality metric: the search that found it
    proved it (an admissible A*, or an anytime search that ran to its end: `details["optimal"]`), under the
    task's own costs (`result.cost_model`: not learned ones, which change what is cheapest), and the problem has
    one metric those costs stand for (its action costs, or plan length on a task without costs)."""
    if not (result.solved and result.cost_model == TASK_COSTS and result.delegate):
        return False
    proved = any(
        a.delegate == result.delegate and a.status is Status.SOLVED and a.details.get("optimal") is True
        for a in result.attempts
    )
    metrics = list(getattr(problem, "quality_metrics", ()))
    if not proved or len(metrics) != 1:
        return False
    metric = metrics[0]
    return isinstance(metric, MinimizeActionCosts) or (
        isinstance(metric, MinimizeSequentialPlanLength) and not task.has_action_costs()
    )


def planned_cost(result: PlanResult) -> float:
    """The cost `result`'s plan was planned under, what the anytime planner improves: its learned cost under
    learned costs, else its cost under the task's (inf without a plan)."""
    if not result.solved:
        return math.inf
    if result.cost_model != TASK_COSTS and result.learned_cost is not None:
        return result.learned_cost
    return result.cost if result.cost is not None else math.inf


def improvable(result: PlanResult, task: Task) -> bool:
    """Whether a cost-aware search could find a plan cheaper than `result`'s: there are costs to be cheaper
    under (the task's action costs, or learned ones)."""
    return result.cost_model != TASK_COSTS or task.has_action_costs()


def up_status(result: PlanResult, optimal: bool) -> UpStatus:
    """UP's status for `result` (`STATUSES`; SOLVED_OPTIMALLY only when `optimal`, from `proved_optimal`)."""
    if result.solved and optimal:
        return UpStatus.SOLVED_OPTIMALLY
    return STATUSES[result.status]


def up_plan(result: PlanResult, items: Mapping[str, Any]) -> SequentialPlan:
    """The plan as a `SequentialPlan` of `ActionInstance`s over the problem's own `Action` and `Object` objects
    (`items`: task name -> UP item, `domains.up_bridge.UpTask.items`)."""
    steps = [ActionInstance(items[a.name], tuple(items[arg] for arg in a.args)) for a in result.actions()]
    return SequentialPlan(steps)


def up_metrics(result: PlanResult) -> dict[str, str]:
    """UP's metrics (strings only): who solved it, the cost, the costs it was planned under (and under learned
    ones, the plan's cost under them), the time, and every attempt of the cascade as JSON (`attempts`: delegate,
    status, ms, reason)."""
    attempts = [
        {"delegate": a.delegate, "status": a.status.value, "ms": a.elapsed_ms, "reason": a.reason}
        for a in result.attempts
    ]
    metrics = {
        "status": result.status.value,
        "delegate": result.delegate or "",
        "elapsed_ms": f"{result.elapsed_ms:g}",
        "cost_model": result.cost_model or "",
        "attempts": json.dumps(attempts),
    }
    if result.cost is not None:
        metrics["cost"] = f"{result.cost:g}"
    if result.learned_cost is not None:
        metrics["learned_cost"] = f"{result.learned_cost:g}"
    if result.success_probability is not None:
        metrics["success_probability"] = f"{result.success_probability:g}"
    return metrics


def metric_values(problem: Any, cost: float, length: int) -> dict[Any, int | Fraction] | None:
    """UP's `metric_evaluations` of a valid plan: its cost (from the project's validator, under the task's
    costs) for a MinimizeActionCosts metric, its length for MinimizeSequentialPlanLength; None without one of
    those as the problem's only metric."""
    metrics = list(getattr(problem, "quality_metrics", ()))
    if len(metrics) != 1:
        return None
    metric = metrics[0]
    if isinstance(metric, MinimizeActionCosts):
        value = Fraction(cost).limit_denominator()
        return {metric: int(value) if value.denominator == 1 else value}
    if isinstance(metric, MinimizeSequentialPlanLength):
        return {metric: length}
    return None


def ground_plan(plan: Any, names: Mapping[Any, str]) -> Plan:
    """A UP `SequentialPlan` as the task's ground actions (`names`: UP item -> task name); `KeyError` for an
    action or object the problem does not have."""
    steps = []
    for instance in plan.actions:
        args = tuple(names[parameter.object()] for parameter in instance.actual_parameters)
        steps.append(GroundAction(names[instance.action], args))
    return steps
