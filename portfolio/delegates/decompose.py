"""Solving a goal one subgoal at a time with the classical planners: what both decomposers (LLM and goal agenda)
share.

Each subgoal is planned from the state the previous sub-plan reached, and each sub-plan is simulated before the
next one starts, so a decomposition that cannot work is caught at the subgoal that breaks it, with a diagnosis
(which subgoal, from which state, why). The concatenation is validated against the original task before anyone
sees it.

Translation is the expensive part of a Fast Downward call (seconds on parking), and a decomposition asks many
questions about one task. So the task is translated once, with its full goal, and every subgoal made of atoms that
translation represents is searched on the same SAS task with its goal and initial state rewritten: relevance
analysis keeps every atom the full goal depends on, and states reached by sub-plans are reachable ones, which is
what `SasTask.with_init` needs. Other subgoals (non-goal atoms the translator pruned, negations, disjunctions) are
restated as a PDDL sub-task and planned from scratch.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from domains.model import And, Atom, Formula, GroundAction, Plan, State, Task
from domains.pddl_writer import domain_to_pddl, formula_to_pddl, problem_to_pddl
from domains.validate import holds, unmet_goals, validate_plan
from portfolio.delegates.fast_downward.sas import SasTask, sas_atom_name
from portfolio.engine import cancel
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Resource, Status
from traces.attempt_details import AgendaStep

log = logging.getLogger(__name__)

CLASSICAL = ("fast-downward", "pyperplan")
# Outcomes after which no other classical planner is tried on a subgoal: a plan, a proof, or no time left.
_SETTLED = (Status.SOLVED, Status.UNSOLVABLE, Status.TIMEOUT)


def subtask(task: Task, state: State, goal: Formula) -> Task:
    """`task` restated from `state` with `goal`, PDDL texts included (the domain text kept byte for byte)."""
    problem = dataclasses.replace(task.problem, init=frozenset(state), goal=goal)
    return Task(
        task.domain,
        problem,
        domain_pddl=task.domain_pddl or domain_to_pddl(task.domain),
        problem_pddl=problem_to_pddl(problem),
    )


def conjunction(literals: Sequence[Formula]) -> Formula:
    return literals[0] if len(literals) == 1 else And(tuple(literals))


def goal_text(goal: Formula) -> str:
    if isinstance(goal, And):
        return " ".join(formula_to_pddl(part) for part in goal.parts)
    return formula_to_pddl(goal)


def _positive_atoms(goal: Formula) -> list[Atom] | None:
    """The atoms of a conjunction of positive atoms; None for any other formula."""
    parts = goal.parts if isinstance(goal, And) else (goal,)
    atoms = [p for p in parts if isinstance(p, Atom)]
    return atoms if len(atoms) == len(parts) else None


class SubgoalStep(AgendaStep, total=False):
    """How one subgoal of a sequence was planned (`SequenceResult.steps`): the goal agenda's record of it
    (`AgendaStep`) and the subgoal itself."""

    subgoal: str


@dataclass
class SequenceResult:
    """What solving a list of subgoals in order gave: the whole plan (validated against the task's own goal),
    or the critique that says where and why it stopped."""

    status: Status
    plan: Plan | None
    state: State
    solved: int  # subgoals achieved
    critique: str = ""
    steps: list[SubgoalStep] = field(default_factory=list)


class SubgoalSolver(Resource):
    """Plans subgoals with classical delegates: `delegates` when given (not owned; `portfolio.delegates.registry`
    hands it the classical tier's own), else its own Fast Downward and pyperplan, made on first use (owned,
    closed by `close`). Pyperplan only runs when Fast Downward
    fails without a verdict (error, unsupported, incomplete, memout), never after a timeout or a proof, as the
    deadline is shared."""

    def __init__(
        self,
        classical: Sequence[str] = CLASSICAL,
        fd_alias: str | None = None,
        fd_search: str | None = None,
        delegates: Sequence[Delegate] | None = None,
    ) -> None:
        self._names = [n for n in classical if n in CLASSICAL] or list(CLASSICAL)
        self._fd_alias, self._fd_search = fd_alias or "lama-first", fd_search
        self._delegates: list[Delegate] | None = list(delegates) if delegates is not None else None
        self._owned = delegates is None

    @property
    def delegates(self) -> list[Delegate]:
        if self._delegates is None:
            self._delegates = [self._make(name) for name in self._names]
        return self._delegates

    def _make(self, name: str) -> Delegate:
        if name == "fast-downward":
            from portfolio.delegates.fast_downward.delegate import FastDownward

            return FastDownward(alias=self._fd_alias, search=self._fd_search)
        from portfolio.delegates.pyperplan import Pyperplan

        return Pyperplan()

    def _fast_downward(self):
        from portfolio.delegates.fast_downward.delegate import FastDownward

        return next((d for d in self.delegates if isinstance(d, FastDownward)), None)

    def warm_up(self) -> None:
        for delegate in self.delegates:
            delegate.warm_up()

    def close(self) -> None:
        if self._owned and self._delegates is not None:
            for delegate in self._delegates:
                delegate.close()
            self._delegates = None

    # -- translation --------------------------------------------------------------------------------------
    def translation(self, request: PlanRequest, deadline: float) -> tuple[Any, str]:
        """(the Fast Downward translation of the full task or None, why not). Cached by the delegate."""
        fast_downward = self._fast_downward()
        if fast_downward is None:
            return None, "no Fast Downward delegate"
        from portfolio.engine.workers import BudgetExpired, WorkerCrashed, WorkerError

        try:
            translation, _ = fast_downward.translate(request, deadline)
        except BudgetExpired:
            return None, "budget expired during translation"
        except (WorkerError, WorkerCrashed) as error:
            return None, f"translator failed: {error}"
        return translation, ""

    # -- one subgoal --------------------------------------------------------------------------------------
    def solve_goal(
        self, request: PlanRequest, state: State, goal: Formula, deadline: float, translation: Any = None
    ) -> tuple[DelegateOutcome, State]:
        """A plan from `state` to a state where `goal` holds, checked by simulation, and the state it reaches;
        or why there is none (and `state`). UNSOLVABLE means a planner proved the subgoal unreachable from
        `state`."""
        task = request.task
        if holds(goal, state, task):
            return DelegateOutcome(Status.SOLVED, plan=[], details={"via": "already true"}), state
        outcome = None
        if translation is not None and translation.sas is not None and time.monotonic() < deadline:
            outcome = self._search_sas(request, translation, state, goal, deadline)
        if outcome is None or outcome.status not in _SETTLED:
            sub = PlanRequest(
                task=subtask(task, state, goal),
                costs=request.costs,
                cost_function=request.cost_function,
                excluded=request.excluded,
                selection=request.selection,
            )
            for delegate in self.delegates:
                if cancel.expired(deadline):
                    break
                if not delegate.supports(sub.task):
                    continue
                try:
                    outcome = delegate.solve(sub, deadline)
                except Exception as error:
                    outcome = DelegateOutcome(Status.ERROR, reason=f"{delegate.name}: {type(error).__name__}: {error}")
                outcome.details.setdefault("via", delegate.name)
                if outcome.status in _SETTLED:
                    break
        if outcome is None:
            return DelegateOutcome(Status.TIMEOUT, reason="budget used up"), state
        if outcome.status is not Status.SOLVED:
            return outcome, state
        assert outcome.plan is not None
        simulated = validate_plan(task, outcome.plan, init=state)
        if simulated.failed_step is not None or not holds(goal, simulated.final_state, task):
            why = simulated.message if simulated.failed_step is not None else "the subgoal does not hold after it"
            return DelegateOutcome(Status.ERROR, reason=f"sub-plan rejected by the validator: {why}"), state
        return outcome, simulated.final_state

    def _search_sas(
        self, request: PlanRequest, translation: Any, state: State, goal: Formula, deadline: float
    ) -> DelegateOutcome | None:
        """Search the full task's SAS translation with `goal` and `state` swapped in; None when that
        translation cannot express them."""
        sas: SasTask = translation.sas
        atoms = _positive_atoms(goal)
        if atoms is None:
            return None
        index = sas.atom_index()
        pairs = sorted({index[sas_atom_name(a)] for a in atoms if sas_atom_name(a) in index})
        if len(pairs) != len(atoms) or len({var for var, _ in pairs}) != len(pairs):
            return None  # pruned atoms, or two values of one variable (a mutex: let a fresh translation say so)
        init_values = sas.with_init(translation.init, frozenset(state))
        if init_values is None:
            return None
        goal_section = "begin_goal\n" + f"{len(pairs)}\n" + "".join(f"{v} {d}\n" for v, d in pairs) + "end_goal\n"
        costs = request.grounded_costs([f"({name})" for name in sas.operator_names]) if request.has_costs else None
        text = dataclasses.replace(sas, goal=goal_section).render(
            init=init_values, costs=costs, excluded=request.excluded
        )
        # Coverage is what a decomposer is for: the cost-aware search joins only when learned costs steer.
        fast_downward = self._fast_downward()
        return fast_downward.search_sas(
            text,
            deadline,
            fast_downward.plan_sas(with_costs=bool(costs)),
            details={"via": "fast-downward (shared translation)"},
        )

    # -- a sequence ---------------------------------------------------------------------------------------
    def solve_sequence(
        self, request: PlanRequest, subgoals: Sequence[Formula], deadline: float, translation: Any = None
    ) -> SequenceResult:
        """Plan `subgoals` in order, each from the state the previous sub-plan reached, then check the
        concatenation against the task's goal. Stops at the first subgoal that fails, with a critique."""
        task = request.task
        state = request.initial_state
        plan: Plan = []
        steps: list[SubgoalStep] = []
        for number, goal in enumerate(subgoals, start=1):
            started = time.monotonic()
            outcome, reached = self.solve_goal(request, state, goal, deadline, translation)
            record: SubgoalStep = {
                "subgoal": goal_text(goal),
                "status": outcome.status.value,
                "ms": round((time.monotonic() - started) * 1000, 1),
                "via": outcome.details.get("via", ""),
                "steps": len(outcome.plan or []),
            }
            steps.append(record)
            if outcome.status is not Status.SOLVED:
                record["reason"] = outcome.reason
                critique = _subgoal_critique(task, number, goal, state, outcome, len(plan))
                status = Status.TIMEOUT if outcome.status is Status.TIMEOUT else Status.ERROR
                return SequenceResult(status, None, state, number - 1, critique, steps)
            assert outcome.plan is not None
            plan.extend(outcome.plan)
            state = reached
        final = validate_plan(task, plan, init=request.initial_state)
        if not final.ok:
            missing = final.missing or unmet_goals(task, final.final_state)
            critique = (
                f"after all {len(subgoals)} subgoals the goal is not reached: "
                f"{', '.join(missing)} {'does' if len(missing) == 1 else 'do'} not hold"
            )
            if final.failed_step is not None:
                critique = f"the concatenated plan is invalid: {final.message}"
            return SequenceResult(Status.ERROR, None, final.final_state, len(subgoals), critique, steps)
        banned = [str(a) for a in plan if request.is_excluded(a)]
        if banned:
            return SequenceResult(
                Status.ERROR,
                None,
                final.final_state,
                len(subgoals),
                f"the plan uses the excluded action {banned[0]}",
                steps,
            )
        return SequenceResult(Status.SOLVED, plan, final.final_state, len(subgoals), "", steps)


def _subgoal_critique(
    task: Task, number: int, goal: Formula, state: State, outcome: DelegateOutcome, steps_before: int
) -> str:
    where = "the initial state" if steps_before == 0 else f"the state after the first {number - 1} subgoal(s)"
    head = f"subgoal {number} ({goal_text(goal)})"
    if outcome.status is Status.UNSOLVABLE:
        return f"{head} is unreachable from {where}: {outcome.reason or 'a planner proved it'}"
    if outcome.status is Status.TIMEOUT:
        return f"{head} could not be reached from {where} within the budget ({outcome.reason})"
    return f"{head} could not be planned from {where}: {outcome.reason}"


def relevant_facts(state: State, action: GroundAction, limit: int = 30) -> list[str]:
    """Atoms of `state` that mention an argument of `action`: context for a precondition critique."""
    args = set(action.args)
    return [str(a) for a in sorted(state) if args & set(a.args)][:limit]
