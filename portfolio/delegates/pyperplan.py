"""The pyperplan delegate: greedy best-first search with hFF, in a killable worker process.

pyperplan is called as a library (the same engine up-pyperplan wraps) rather than through unified-planning:
importing unified-planning takes ~2.5 s, more than the classical tier's whole budget. pyperplan ignores action
costs and runs no timer of its own; the worker process is what makes the budget hard.
"""

from __future__ import annotations

from portfolio.results import DelegateOutcome, PlanRequest, Status, parse_ground_action
from portfolio.workers import BudgetExpired, WorkerCrashed, WorkerError, WorkerProcess


class Pyperplan:
    def __init__(self, budget_s: float | None = None, name: str = "pyperplan") -> None:
        self.name = name
        self.budget_s = budget_s
        self._worker: WorkerProcess | None = None

    def warm_up(self) -> None:
        if self._worker is None:
            self._worker = WorkerProcess(preload=("pyperplan",))

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        if request.excluded:
            return DelegateOutcome(Status.ERROR, reason="pyperplan cannot exclude grounded actions")
        self.warm_up()
        assert self._worker is not None
        notes = []
        if request.task.has_action_costs() or request.costs:
            notes.append("pyperplan ignores action costs: the plan may not be the cheapest")
        task = request.effective_task()
        try:
            answer = self._worker.call("pyperplan", deadline, domain_pddl=task.domain_pddl, problem_pddl=task.problem_pddl)
        except BudgetExpired:
            return DelegateOutcome(Status.TIMEOUT, reason="budget expired (pyperplan worker killed)")
        except (WorkerError, WorkerCrashed) as error:
            return DelegateOutcome(Status.ERROR, reason=f"pyperplan failed: {error}")
        if answer["plan"] is None:
            return DelegateOutcome(Status.UNSOLVABLE, reason="pyperplan exhausted the search space")
        plan = [parse_ground_action(step) for step in answer["plan"]]
        return DelegateOutcome(Status.SOLVED, plan=plan, reason="; ".join(notes))

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
