"""Searches in this process for small tasks, before Fast Downward's search processes (`FastDownward.solve`).

- `greedy`: a replan of a small unit-cost task (translation reused, init rewritten): GBFS with hFF
  (`portfolio.delegates.fast_downward.sas_search`), first plan.
- `cheapest`: a small task with costs (learned, or the task's own), quality "anytime" or "optimal": A* bounded
  by the root's LM-cut landmarks (`portfolio.delegates.fast_downward.sas_astar`), an optimal plan.

Both give up (None, the reason in `details["in_process"]`) at their node cap or their time budget, and the
process searches run within what is left of the budget. Only for satisficing configurations: an optimal alias
or a raw search string asked for a search of its own.
"""

from __future__ import annotations

import time
from typing import Protocol

from portfolio.delegates.fast_downward.sas import SasTask, operator_action
from portfolio.delegates.fast_downward.sas_astar import astar_search
from portfolio.delegates.fast_downward.sas_search import Problem, compile_task, greedy_search
from portfolio.delegates.fast_downward.searches import SATISFICING
from portfolio.engine.results import DelegateOutcome, Status
from traces.attempt_details import AttemptDetails


class Settings(Protocol):
    """What the searches here read of their `FastDownward` (a protocol, so this module need not import it)."""

    search: str | None
    alias: str
    inprocess_max_operators: int
    inprocess_node_cap: int


# In-process search (`portfolio.delegates.fast_downward.sas_search`, `portfolio.delegates.fast_downward.sas_astar`):
# only for tasks with at most this many
# operators. Measured on 2 cores, from the initial state: pure-Python GBFS+hFF solves the IPC tasks of
# `portfolio.benchsuite.measure` (4-72
# operators) in 0.1-7 ms plus ~0.5 ms to compile, where a whole perturbed replan through a `downward` process took
# 9-12 ms (`benchmarks.bench_reuse`); at 156-180 operators (logistics00 8-0, depot p02) it took 21-28 ms, slower
# than the process, since hFF costs O(operators) per state in Python. 120 sits between the two.
INPROCESS_MAX_OPERATORS = 120
# The in-process search stops after this long (or at the deadline): the process search gets what is left.
INPROCESS_BUDGET_S = 0.1
INPROCESS_NODE_CAP = 20_000
# A* gives up sooner: its plan must be proved optimal, and a task it cannot finish in a few thousand
# states is better left to the processes at once. Measured (`python -m benchmarks.experiments.cost_search`, held-out
# seeds
# 100-109): with 0.1 s the tools-large and logistics-large calls it could not finish waited 0.1 s for nothing
# (median 120-144 ms against 13-17 ms for the processes' first plan); the small families finish in 4-12 ms.
ASTAR_BUDGET_S = 0.02


def _problem(fd: Settings, sas: SasTask, excluded: frozenset[str], details: AttemptDetails) -> Problem | None:
    """The in-process search's view of `sas`, or None when this delegate's configuration or the task's size rule
    it out, or the task has axioms (recorded in `details["in_process"]`)."""
    if fd.search or fd.alias not in SATISFICING or len(sas.operators) > fd.inprocess_max_operators:
        return None
    problem = compile_task(sas, excluded)
    if problem is None:
        details["in_process"] = {"status": "unsupported", "reason": "axioms"}
    return problem


def greedy(
    fd: Settings,
    sas: SasTask,
    init: tuple[int, ...],
    excluded: frozenset[str],
    deadline: float,
    details: AttemptDetails,
) -> DelegateOutcome | None:
    """A replan on a small unit-cost task (translation reused, init rewritten): GBFS+hFF in this process, no
    search process. The plan, or None (after recording why in `details["in_process"]`) so the process search
    runs within what is left of the budget. Only for satisficing configurations: an optimal one promised
    optimal plans."""
    started = time.monotonic()
    problem = _problem(fd, sas, excluded, details)
    if problem is None:
        return None
    result = greedy_search(problem, init, min(deadline, started + INPROCESS_BUDGET_S), node_cap=fd.inprocess_node_cap)
    details["in_process"] = {
        "status": result.status.value,
        "expanded": result.expanded,
        "ms": round((time.monotonic() - started) * 1000, 3),
    }
    if result.status is not Status.SOLVED or result.plan is None:
        return None
    details["search"] = "in-process"
    return DelegateOutcome(Status.SOLVED, plan=[operator_action(name) for name in result.plan], details=details)


def cheapest(
    fd: Settings,
    sas: SasTask,
    init: tuple[int, ...],
    costs: dict[str, float] | None,
    excluded: frozenset[str],
    deadline: float,
    details: AttemptDetails,
) -> DelegateOutcome | None:
    """A task with costs below the in-process threshold: A* in this process
    (`portfolio.delegates.fast_downward.sas_astar`), whose plan is optimal; None (after recording why in
    `details["in_process"]`)
    so the process searches run within what is left of the budget."""
    started = time.monotonic()
    problem = _problem(fd, sas, excluded, details)
    if problem is None:
        return None
    op_costs = [
        costs.get(f"({op.name})", float(op.cost)) if costs else float(op.cost)
        for op in sas.operators
        if not excluded or f"({op.name})" not in excluded
    ]
    result, cost = astar_search(
        problem, op_costs, init, min(deadline, started + ASTAR_BUDGET_S), node_cap=fd.inprocess_node_cap
    )
    ms = round((time.monotonic() - started) * 1000, 3)
    details["in_process"] = {"status": result.status.value, "expanded": result.expanded, "ms": ms}
    if result.status is not Status.SOLVED or result.plan is None or cost is None:
        return None
    details["search"] = "in-process-astar"
    details["plans"] = [{"search": "in-process-astar", "cost": round(cost, 3), "ms": ms}]
    details["optimal"] = True
    return DelegateOutcome(Status.SOLVED, plan=[operator_action(name) for name in result.plan], details=details)
