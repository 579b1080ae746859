"""Searches in this process for small tasks, before Fast Downward's search processes (`FastDownward.solve`).

- `greedy`: a replan of a small unit-cost task (translation reused, init rewritten): GBFS with hFF
  (`portfolio.delegates.fast_downward.sas_search`), first plan.
- `cheapest`: a small task with costs (learned, or the task's own), quality "anytime" or "optimal": A* bounded
  by the root's LM-cut landmarks (`portfolio.delegates.fast_downward.sas_astar`), an optimal plan.

Which one runs, if any, is the call's `search_plan.SearchPlan.inprocess` (only for satisficing configurations: an
optimal alias or a raw search string asked for a search of its own). Both give up (None, the reason in
`details["in_process"]`) at their node cap or their time budget, and the process searches run within what is
left of the budget. A plan found here is answered under `INPROCESS_NAME` (`DelegateOutcome.delegate`): these are
this project's own searches over Fast Downward's translation, not Fast Downward's, and attempts and results say
so.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from portfolio.delegates.fast_downward.sas import SasTask, operator_action
from portfolio.delegates.fast_downward.sas_astar import astar_search
from portfolio.delegates.fast_downward.sas_search import Problem, compile_task, greedy_search
from portfolio.engine.results import DelegateOutcome, Status
from traces.attempt_details import AttemptDetails

if TYPE_CHECKING:
    from portfolio.delegates.fast_downward.search_plan import SearchPlan

# The name attempts and results give a plan found here (the Fast Downward delegate's own is "fast-downward").
INPROCESS_NAME = "fd-inprocess"


# The in-process search stops after this long (or at the deadline): the process search gets what is left.
INPROCESS_BUDGET_S = 0.1
# A* gives up sooner: its plan must be proved optimal, and a task it cannot finish in a few thousand states is
# better left to the processes at once (docs/decisions/in-process-astar.md).
ASTAR_BUDGET_S = 0.02


def search(
    plan: SearchPlan, sas: SasTask, init: tuple[int, ...], deadline: float, details: AttemptDetails
) -> DelegateOutcome | None:
    """The in-process search `plan.inprocess` names on `sas` from `init`: its plan (answered as
    `INPROCESS_NAME`), or None (why in `details["in_process"]`) so the process searches run."""
    if plan.inprocess == "greedy":
        return greedy(plan, sas, init, deadline, details)
    if plan.inprocess == "astar":
        solved = cheapest(plan, sas, init, deadline, details)
        if solved is not None:
            details["quality"] = plan.quality
        return solved
    return None


def _problem(sas: SasTask, excluded: frozenset[str], details: AttemptDetails) -> Problem | None:
    """The in-process search's view of `sas`, or None when the task has axioms (recorded in
    `details["in_process"]`)."""
    problem = compile_task(sas, excluded)
    if problem is None:
        details["in_process"] = {"status": "unsupported", "reason": "axioms"}
    return problem


def greedy(
    plan: SearchPlan, sas: SasTask, init: tuple[int, ...], deadline: float, details: AttemptDetails
) -> DelegateOutcome | None:
    """A replan on a small unit-cost task (translation reused, init rewritten): GBFS+hFF in this process, no
    search process, at most `plan.inprocess_node_cap` states. The plan, or None (after recording why in
    `details["in_process"]`) so the process search runs within what is left of the budget."""
    started = time.monotonic()
    problem = _problem(sas, plan.excluded, details)
    if problem is None:
        return None
    result = greedy_search(problem, init, min(deadline, started + INPROCESS_BUDGET_S), node_cap=plan.inprocess_node_cap)
    details["in_process"] = {
        "status": result.status.value,
        "expanded": result.expanded,
        "ms": round((time.monotonic() - started) * 1000, 3),
    }
    if result.status is not Status.SOLVED or result.plan is None:
        return None
    details["search"] = "in-process"
    return DelegateOutcome(
        Status.SOLVED, plan=[operator_action(name) for name in result.plan], details=details, delegate=INPROCESS_NAME
    )


def cheapest(
    plan: SearchPlan, sas: SasTask, init: tuple[int, ...], deadline: float, details: AttemptDetails
) -> DelegateOutcome | None:
    """A task with costs (`plan.costs`, else the task's own) below the in-process threshold: A* in this process
    (`portfolio.delegates.fast_downward.sas_astar`), whose plan is optimal; None (after recording why in
    `details["in_process"]`) so the process searches run within what is left of the budget."""
    started = time.monotonic()
    excluded = plan.excluded
    problem = _problem(sas, excluded, details)
    if problem is None:
        return None
    costs: Mapping[str, float] | None = plan.costs
    op_costs = [
        costs.get(f"({op.name})", float(op.cost)) if costs else float(op.cost)
        for op in sas.operators
        if not excluded or f"({op.name})" not in excluded
    ]
    result, cost = astar_search(
        problem, op_costs, init, min(deadline, started + ASTAR_BUDGET_S), node_cap=plan.inprocess_node_cap
    )
    ms = round((time.monotonic() - started) * 1000, 3)
    details["in_process"] = {"status": result.status.value, "expanded": result.expanded, "ms": ms}
    if result.status is not Status.SOLVED or result.plan is None or cost is None:
        return None
    details["search"] = "in-process-astar"
    details["plans"] = [{"search": "in-process-astar", "cost": round(cost, 3), "ms": ms}]
    details["optimal"] = True
    return DelegateOutcome(
        Status.SOLVED, plan=[operator_action(name) for name in result.plan], details=details, delegate=INPROCESS_NAME
    )
