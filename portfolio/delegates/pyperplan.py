"""The pyperplan delegate: greedy best-first search with hFF, in a killable worker process.

pyperplan is called as a library (the same engine up-pyperplan wraps) rather than through unified-planning:
importing unified-planning takes ~2.5 s, more than the classical tier's whole budget. pyperplan ignores action
costs and runs no timer of its own; the worker process is what makes the budget hard.
"""

from __future__ import annotations

from dataclasses import replace

from domains.model import STRIPS_FRAGMENT, Task
from domains.pddl_writer import task_with_texts
from portfolio.results import DelegateOutcome, PlanRequest, Status, parse_ground_action
from portfolio.workers import BudgetExpired, WorkerCrashed, WorkerError, WorkerProcess


class Pyperplan:
    def __init__(self, budget_s: float | None = None, name: str = "pyperplan") -> None:
        self.name = name
        self.budget_s = budget_s
        self._worker: WorkerProcess | None = None
        self._cost_free: dict[str, Task] = {}

    def warm_up(self) -> None:
        if self._worker is None:
            self._worker = WorkerProcess(preload=("pyperplan",))

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        if request.excluded:
            return DelegateOutcome(Status.ERROR, reason="pyperplan cannot exclude grounded actions")
        if not request.task.is_strips:
            # pyperplan's parser reads STRIPS with typing only: decline at once rather than fail in the worker.
            unsupported = sorted(request.task.requirements_used() - STRIPS_FRAGMENT)
            return DelegateOutcome(Status.ERROR, reason="declined: pyperplan handles STRIPS only; the task uses "
                                   + " ".join(unsupported))
        self.warm_up()
        assert self._worker is not None
        notes = []
        if request.task.has_action_costs() or request.has_costs:
            notes.append("pyperplan ignores action costs: the plan may not be the cheapest")
        task = request.effective_task()
        if task.has_action_costs():
            task = self._without_costs(task)
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

    def _without_costs(self, task: Task) -> Task:
        """The task with action costs removed: pyperplan's parser rejects `:functions`, and it would ignore the
        costs anyway."""
        cached = self._cost_free.get(task.fingerprint)
        if cached is None:
            domain = replace(
                task.domain,
                requirements=tuple(r for r in task.domain.requirements if r != ":action-costs"),
                functions=(),
                actions=tuple(replace(schema, cost=None) for schema in task.domain.actions),
            )
            problem = replace(task.problem, numeric_init=(), minimize_total_cost=False)
            cached = self._cost_free[task.fingerprint] = task_with_texts(domain, problem)
        return cached

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
