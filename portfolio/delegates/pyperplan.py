"""The pyperplan delegate: greedy best-first search with hFF, in a killable worker process.

pyperplan is called as a library (the same engine up-pyperplan wraps, through its public parser and grounder)
rather than through unified-planning: importing unified-planning takes ~2.5 s, more than the classical tier's
whole budget. pyperplan ignores action costs and runs no timer of its own; the worker process is what makes
the budget hard.

Its search prunes to helpful actions, which makes it incomplete: when it runs out of states the attempt is
`incomplete` and the cascade goes on (a task where the only plan starts with an action the relaxed plan does not
use is solvable, yet pyperplan finds nothing). It reads STRIPS with types only; `supports` declines anything
else before any time is spent.
"""

from __future__ import annotations

from dataclasses import replace

from domains.ground_text import parse_ground_action
from domains.model import STRIPS_FRAGMENT, TRUE, And, Atom, Formula, Task
from domains.pddl_writer import task_with_texts
from portfolio.delegates.pyperplan_search import PRELOAD, SEARCH_OP
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from portfolio.engine.workers import BudgetExpired, OutOfMemory, WorkerCrashed, WorkerError, WorkerProcess


def _atoms_only(formula: Formula) -> bool:
    """True for TRUE, an atom, or a conjunction of atoms (what pyperplan's parser reads)."""
    if formula == TRUE or isinstance(formula, Atom):
        return True
    return isinstance(formula, And) and all(isinstance(part, Atom) for part in formula.parts)


def strips_features(task: Task) -> list[str]:
    """What of `task` goes beyond STRIPS with types (empty when pyperplan can read it)."""
    found = [f"requirement {name}" for name in sorted(task.requirements_used() - STRIPS_FRAGMENT)]
    if any(schema.precondition == TRUE for schema in task.domain.actions):
        found.append("an action without a precondition (its parser requires one)")
    if not all(_atoms_only(schema.precondition) for schema in task.domain.actions):
        found.append("preconditions other than conjunctions of atoms")
    if any(e.condition != TRUE or e.parameters for schema in task.domain.actions for e in schema.effects):
        found.append("conditional or universal effects")
    if not _atoms_only(task.problem.goal):
        found.append("a goal other than a conjunction of atoms")
    return found


class Pyperplan(Delegate):
    source = "classical"

    def __init__(self, budget_s: float | None = None, name: str = "pyperplan") -> None:
        self.name = name
        self.budget_s = budget_s
        self._worker: WorkerProcess | None = None
        self._cost_free: dict[str, Task] = {}

    def supports(self, task: Task) -> bool:
        return not strips_features(task)

    def decline_reason(self, task: Task) -> str:
        return "pyperplan reads STRIPS with types only; this task has " + ", ".join(strips_features(task))

    def warm_up(self) -> None:
        if self._worker is None:
            self._worker = WorkerProcess(preload=PRELOAD)

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        self.warm_up()
        assert self._worker is not None
        notes = []
        if request.task.has_action_costs() or request.has_costs:
            notes.append("pyperplan ignores action costs: the plan may not be the cheapest")
        task = request.effective_task()
        if task.has_action_costs():
            task = self._without_costs(task)
        try:
            answer = self._worker.call(
                SEARCH_OP,
                deadline,
                domain_pddl=task.domain_pddl,
                problem_pddl=task.problem_pddl,
                excluded=tuple(sorted(request.excluded)),
            )
        except BudgetExpired:
            return DelegateOutcome(Status.TIMEOUT, reason="budget expired (pyperplan worker killed)")
        except OutOfMemory as error:
            return DelegateOutcome(Status.MEMOUT, reason=f"pyperplan: {error}")
        except (WorkerError, WorkerCrashed) as error:
            return DelegateOutcome(Status.ERROR, reason=f"pyperplan failed: {error}")
        if answer["plan"] is None:
            return DelegateOutcome(
                Status.INCOMPLETE,
                reason="pyperplan's search (helpful actions only) exhausted its search space; that proves nothing",
            )
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
