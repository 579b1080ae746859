"""The goal-agenda decomposer: the decomposer tier's default when no LLM is configured.

Koehler & Hoffmann's goal agenda (as in FF): goal atom g1 should be achieved before g2 when, once g2 has just been
achieved, g1 can no longer be reached without destroying g2. That test is approximated on Fast Downward's SAS
translation of the task, in the relaxed (delete-free, value-accumulating) task: start from every fact the relaxed
task reaches from the current state, with everything that is false right after achieving g2 and the other goals
removed (other values of the variables its achievers set, and facts in a mutex group with g2) and g2 added, forbid
operators that move g2's variable elsewhere, and see whether g1 is still reachable
(`portfolio.delegates.relaxed.layers`). Strongly connected goals form one agenda entry; ties go to the goal the
relaxed task reaches first.

The goals are then planned incrementally (entries 1..k as the k-th subgoal, so achieved goals are kept) by the
classical planners on one shared translation, with part of the budget; if that fails, the full goal is planned
with what is left, which is the larger-budget classical run the 1 s tier could not afford. When the cascade has
carried Fast Downward's work over from the classical tier (`portfolio.engine.cascade`), that run is already going on:
the agenda then waits for (and reuses) its translation and, on unit-cost tasks (where that run is the same race
as its full-goal one), takes the whole budget and skips the full goal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from domains.graphs import strongly_connected_components
from domains.model import And, Atom, Formula, Task
from portfolio.delegates.decompose import SubgoalSolver, SubgoalStep, conjunction
from portfolio.delegates.fast_downward.sas import SasTask, sas_atom_name
from portfolio.delegates.fast_downward.sas_search import Problem, parse_operator, relax
from portfolio.delegates.relaxed import INFINITY, Relaxation, layers
from portfolio.engine import cancel
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from traces.attempt_details import AgendaStep, AttemptDetails

log = logging.getLogger(__name__)

Fact = tuple[int, int]  # (SAS variable, value)


def mutex_groups(sas: SasTask) -> list[set[Fact]]:
    """The translator's mutex groups (from the SAS head)."""
    lines = sas.head.split("\n")
    groups: list[set[Fact]] = []
    for number, line in enumerate(lines):
        if line == "begin_mutex_group":
            size = int(lines[number + 1])
            pairs = (lines[number + 2 + i].split() for i in range(size))
            groups.append({(int(var), int(value)) for var, value in pairs})  # each line: "var value"
    return groups


def goal_agenda(
    sas: SasTask, init_values: Sequence[int], goals: Sequence[Fact], deadline: float | None = None
) -> list[list[Fact]]:
    """The goal facts grouped and ordered into an agenda (see the module docstring)."""
    sizes = tuple(len(values) for values in sas.values)
    operators = [parse_operator(op.name, op.body) for op in sas.operators]
    relaxation = relax(Problem(sizes, (), tuple(operators)))
    facts = [(var, value) for var, size in enumerate(sizes) for value in range(size)]  # by fact number
    plain = [tuple((var, new) for conds, var, new in op.effects if not conds) for op in operators]
    groups = mutex_groups(sas)
    stop = None if deadline is None else lambda: cancel.expired(deadline)
    undoing = _undoing(relaxation, sizes, plain)
    base_levels = _levels(relaxation, facts, set(enumerate(init_values)), set(), stop)
    before: dict[Fact, set[Fact]] = {g: set() for g in goals}  # g -> goals that must come before g
    for g2 in goals:
        if deadline is not None and cancel.expired(deadline):
            break
        false_after = _false_after(plain, groups, sizes, g2)
        # Other goals are taken out of the start: the question is whether they can still be achieved.
        start = (set(base_levels) - false_after - set(goals)) | {g2}
        reach = _levels(relaxation, facts, start, undoing(g2), stop)
        if deadline is not None and cancel.expired(deadline):
            break  # a cut-off exploration would invent orders; keep the ones computed in full
        for g1 in goals:
            if g1 != g2 and g1 not in reach:
                before[g2].add(g1)
    order = _condensed_order(list(goals), before, lambda g: base_levels.get(g, 10**9))
    return order


def _levels(
    relaxation: Relaxation, facts: list[Fact], start: set[Fact], left_out: set[int], stop: Callable[[], bool] | None
) -> dict[Fact, int]:
    """The facts the relaxed task reaches from `start` without the unary operators `left_out`, with their first
    layer; when `stop` cuts the exploration short, the layers completed before it."""
    offsets = relaxation.offsets
    cost = layers(relaxation, [offsets[var] + value for var, value in start], left_out, stop).cost
    return {facts[number]: int(layer) for number, layer in enumerate(cost) if layer != INFINITY}


def _undoing(
    relaxation: Relaxation, sizes: Sequence[int], plain: Sequence[tuple[Fact, ...]]
) -> Callable[[Fact], set[int]]:
    """For a goal fact, the unary operators that would move its variable elsewhere: every one of an operator that
    does so unconditionally, and each conditional effect that does (indexed once, asked once per goal)."""
    unary_of: list[list[int]] = [[] for _ in plain]
    adding: list[list[int]] = [[] for _ in range(relaxation.facts)]
    for unary, (added, origin) in enumerate(zip(relaxation.effect, relaxation.origin, strict=True)):
        unary_of[origin].append(unary)
        adding[added].append(unary)
    setting: list[list[tuple[int, int]]] = [[] for _ in sizes]  # per variable: (operator, value) set unconditionally
    for index, effects in enumerate(plain):
        for var, value in effects:
            setting[var].append((index, value))

    def undoing(goal: Fact) -> set[int]:
        var, value = goal
        first = relaxation.offsets[var]
        found = {unary for index, d in setting[var] if d != value for unary in unary_of[index]}
        found.update(unary for x in range(sizes[var]) if x != value for unary in adding[first + x])
        return found

    return undoing


def _false_after(
    plain: Sequence[tuple[Fact, ...]], groups: list[set[Fact]], domain_sizes: Sequence[int], goal: Fact
) -> set[Fact]:
    """Facts that are false in every state where `goal` has just been achieved (approximately: what every
    achiever makes false, plus whatever is mutex with `goal`). `plain`: each operator's unconditional effects."""
    var, val = goal
    common: set[Fact] | None = None
    for effects in plain:
        if goal not in effects:
            continue
        made_false = {(v, x) for v, d in effects for x in range(domain_sizes[v]) if x != d}
        common = made_false if common is None else common & made_false
    false = set(common or ())
    false |= {(var, x) for x in range(domain_sizes[var]) if x != val}
    for group in groups:
        if goal in group:
            false |= group - {goal}
    return false


def _condensed_order(goals: list[Fact], before: dict[Fact, set[Fact]], rank) -> list[list[Fact]]:
    """Topological order of the strongly connected components of the `before` graph, ties by `rank`."""
    components = strongly_connected_components(goals, before.__getitem__)
    where = {g: i for i, comp in enumerate(components) for g in comp}
    needs = {i: {where[o] for g in comp for o in before[g]} - {i} for i, comp in enumerate(components)}
    done: set[int] = set()
    order: list[list[Fact]] = []
    while len(done) < len(components):
        ready = [i for i in range(len(components)) if i not in done and needs[i] <= done]
        best = min(ready, key=lambda i: (min(rank(g) for g in components[i]), i))
        done.add(best)
        order.append(sorted(components[best], key=rank))
    return order


class GoalAgenda(Delegate):
    """Decomposer delegate without an LLM: goal agenda, then the full goal with the rest of the budget.

    `agenda_share` is the part of the budget (after translation) the agenda may use before the fallback starts.
    It runs in the caller's process; its relaxed-reachability loops check the deadline, and its searches run
    in Fast Downward's killable processes.
    """

    source = "decomposition"

    def __init__(
        self,
        solver: SubgoalSolver | None = None,
        budget_s: float | None = None,
        agenda_share: float = 0.5,
        name: str = "goal-agenda",
    ) -> None:
        self.name = name
        self.budget_s = budget_s
        self.agenda_share = agenda_share
        self.solver = solver or SubgoalSolver()

    def supports(self, task: Task) -> bool:
        return True

    def warm_up(self) -> None:
        self.solver.warm_up()

    def close(self) -> None:
        self.solver.close()

    def subgoals(self, request: PlanRequest, translation: Any, deadline: float) -> list[Formula]:
        """The incremental subgoals: goal atoms of agenda entries 1..k, the task's own goal last."""
        task = request.task
        goal = task.problem.goal
        parts = goal.parts if isinstance(goal, And) else (goal,)
        # Derived atoms are set by axioms, which the relaxed operators below do not model: only basic goal
        # atoms are ordered (the last subgoal is the whole goal anyway).
        derived = task.domain.derived_predicates
        atoms = [p for p in parts if isinstance(p, Atom) and p.predicate not in derived]
        if translation is None or translation.sas is None or len(atoms) < 2:
            return [goal]
        sas: SasTask = translation.sas
        index = sas.atom_index()
        by_fact = {index[sas_atom_name(a)]: a for a in atoms if sas_atom_name(a) in index}
        init_values = sas.with_init(translation.init, request.initial_state)
        if init_values is None or len(by_fact) < 2:
            return [goal]
        # Ordering is a heuristic: it may use a quarter of the agenda's time, the searches need the rest.
        agenda = goal_agenda(sas, init_values, list(by_fact), time.monotonic() + 0.25 * (deadline - time.monotonic()))
        subgoals: list[Formula] = []
        kept: list[Formula] = []
        for entry in agenda:
            kept.extend(by_fact[fact] for fact in entry)
            subgoals.append(conjunction(list(kept)))
        subgoals[-1] = goal  # the last subgoal is the goal itself, whatever the agenda could express
        return subgoals

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        start = time.monotonic()
        details = AttemptDetails()
        translation, why = self.solver.translation(request, deadline)
        details["translate_ms"] = round((time.monotonic() - start) * 1000, 1)
        if translation is not None and translation.sas is None:
            return DelegateOutcome(Status.UNSOLVABLE, reason="translator: goal not relaxed-reachable", details=details)
        if why:
            details["translation"] = why
        # With Fast Downward's work carried over (`portfolio.engine.cascade`), it is already searching the full goal on
        # this translation: the agenda gets the whole budget, and the full goal is not searched a second time
        # (that would only take half the CPU from the search that started first). With action costs the
        # carried-over pair is cost-aware and the full-goal race here is not, so that one still runs.
        unit_cost = not request.task.has_action_costs() and not request.has_costs
        full_goal_elsewhere = "fast-downward" in request.carried_over and translation is not None and unit_cost
        share = 1.0 if full_goal_elsewhere else self.agenda_share
        agenda_deadline = time.monotonic() + share * max(0.0, deadline - time.monotonic())
        subgoals = self.subgoals(request, translation, agenda_deadline)
        # Each entry's new atoms only: the subgoals themselves grow quadratically.
        details["agenda"] = _entries(subgoals)
        if len(subgoals) > 1:
            result = self.solver.solve_sequence(request, subgoals, agenda_deadline, translation)
            details["agenda_steps"] = [_agenda_step(step) for step in result.steps]
            if result.status is Status.SOLVED:
                details["method"] = "agenda"
                return DelegateOutcome(Status.SOLVED, plan=result.plan, details=details)
            details["agenda_failure"] = result.critique
        if time.monotonic() >= deadline:
            # out of time before any entry failed there is no agenda failure to name: say what did run out
            cause = details.get("agenda_failure") or details.get("translation") or ""
            return DelegateOutcome(
                Status.TIMEOUT, reason="budget used up" + (f": {cause}" if cause else ""), details=details
            )
        if full_goal_elsewhere:
            details["method"] = "agenda only (the full goal is left to the carried-over fast-downward)"
            return DelegateOutcome(
                Status.INCOMPLETE,
                reason=details.get("agenda_failure", "a one-entry agenda")
                + "; the full goal is left to the carried-over fast-downward",
                details=details,
            )
        result = self.solver.solve_sequence(request, [request.task.problem.goal], deadline, translation)
        details["method"] = "full goal"
        if result.status is Status.SOLVED:
            return DelegateOutcome(Status.SOLVED, plan=result.plan, details=details)
        step = result.steps[-1] if result.steps else {}
        if step.get("status") == Status.UNSOLVABLE.value:
            return DelegateOutcome(Status.UNSOLVABLE, reason=result.critique, details=details)
        return DelegateOutcome(result.status, reason=result.critique, details=details)


def _agenda_step(step: SubgoalStep) -> AgendaStep:
    """A subgoal's record without the subgoal itself (`details["agenda"]` lists the entries)."""
    entry = AgendaStep(status=step["status"], ms=step["ms"], via=step["via"], steps=step["steps"])
    if "reason" in step:
        entry["reason"] = step["reason"]
    return entry


def _entries(subgoals: list[Formula]) -> list[str]:
    seen: set[str] = set()
    entries = []
    for goal in subgoals[:-1]:
        parts = goal.parts if isinstance(goal, And) else (goal,)
        new = [str(p) for p in parts if str(p) not in seen]
        seen.update(new)
        entries.append(" ".join(new))
    return entries + ["(goal)"]
