"""Greedy best-first search with the FF heuristic over a translated SAS+ task, in this process.

What: eager greedy best-first search (duplicate detection, no reopening) guided by hFF (a relaxed plan extracted
from hadd best supporters, unit costs, as Fast Downward's `ff()`: `portfolio.delegates.relaxed.h_ff`), over the
variables and operators of the translator's output (`portfolio.delegates.fast_downward.sas.SasTask`): prevail
conditions, effect preconditions and conditional effects.
Tasks with axioms are declined (`compile` returns None): evaluating derived variables is not worth it here.

Why: a replan from a perturbed state already reuses the cached translation (only `begin_state` changes), and on
small tasks what is left is mostly the cost of the `downward` process itself (start-up, parsing the SAS text,
writing the plan file: figures in `docs/benchmarks.md`, "Micro benchmarks"). A search in this process pays none of
that; a pure-Python hFF costs ~O(operators) per state, so it only pays off on small tasks:
`portfolio.delegates.fast_downward.delegate` uses it below an operator threshold and falls back to the process.

Outcomes follow `portfolio.engine.results.Status`: a plan is `solved`; running out of open states is `incomplete`, never
`unsolvable` (this search is not one of the complete methods the cascade trusts with a proof, and a caller may
have cut operators away); the node cap is `memout`; the deadline, checked every `check_every` expansions, is
`timeout`. Plans ignore action costs, like lama-first's first iteration: callers with costs use the process.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from itertools import count

from portfolio.delegates.fast_downward.sas import SasTask
from portfolio.delegates.relaxed import Relaxation, h_ff, relaxation, state_facts
from portfolio.engine.results import Status

Fact = tuple[int, int]  # (variable, value)


@dataclass(frozen=True)
class Operator:
    name: str
    pre: tuple[Fact, ...]  # prevail conditions and effect preconditions
    effects: tuple[tuple[tuple[Fact, ...], int, int], ...]  # (effect conditions, variable, new value)


@dataclass(frozen=True)
class Problem:
    sizes: tuple[int, ...]
    goal: tuple[Fact, ...]
    operators: tuple[Operator, ...]


def has_conditional_effects(problem: Problem) -> bool:
    """Whether an operator has an effect with conditions of its own (then a unary operator's firing is not its
    operator's: no landmarks, and successors test each effect's conditions)."""
    return any(conds for op in problem.operators for conds, _, _ in op.effects)


@dataclass(frozen=True)
class SearchResult:
    status: Status
    plan: list[str] | None  # operator names, in order
    expanded: int
    evaluated: int


def _ints(line: str) -> list[int]:
    return [int(x) for x in line.split()]


def parse_operator(name: str, body: str) -> Operator:
    """One operator from the lines between its name and its cost (`SasOperator.body`)."""
    lines = body.strip("\n").split("\n")
    prevail_count = int(lines[0])
    pre = [(var, value) for var, value in map(_ints, lines[1 : 1 + prevail_count])]  # prevail: "var value"
    effect_count = int(lines[1 + prevail_count])
    effects = []
    for line in lines[2 + prevail_count : 2 + prevail_count + effect_count]:
        numbers = _ints(line)
        conditions = numbers[0]
        conds = tuple((numbers[1 + 2 * i], numbers[2 + 2 * i]) for i in range(conditions))
        var, old, new = numbers[1 + 2 * conditions :]
        if old != -1:
            pre.append((var, old))
        effects.append((conds, var, new))
    return Operator(name, tuple(dict.fromkeys(pre)), tuple(effects))


def compile_task(task: SasTask, excluded: frozenset[str] = frozenset()) -> Problem | None:
    """The search's view of `task` without the operators in `excluded` (PDDL form), or None when the task has
    axioms (declined)."""
    axiom_line = task.tail.strip("\n").split("\n", 1)[0].strip()
    if axiom_line and int(axiom_line) != 0:
        return None
    goal_lines = task.goal.strip("\n").split("\n")
    goal = tuple(tuple(_ints(line)) for line in goal_lines[2 : 2 + int(goal_lines[1])])
    operators = tuple(
        parse_operator(op.name, op.body) for op in task.operators if not excluded or f"({op.name})" not in excluded
    )
    return Problem(tuple(len(v) for v in task.values), goal, operators)  # type: ignore[arg-type]


def relax(problem: Problem) -> Relaxation:
    """The delete relaxation of `problem` (`portfolio.delegates.relaxed`): a unary operator for each effect of each
    operator, whose conditions are the operator's precondition and the effect's conditions; the fact number of
    (var, value) is offsets[var] + value."""
    offsets, total = [], 0
    for size in problem.sizes:
        offsets.append(total)
        total += size
    unary = (
        ({offsets[v] + d for v, d in (*op.pre, *conds)}, offsets[var] + new, index)
        for index, op in enumerate(problem.operators)
        for conds, var, new in op.effects
    )
    return relaxation(total, unary, (offsets[v] + d for v, d in problem.goal), offsets)


def _successor(op: Operator, state: tuple[int, ...]) -> tuple[int, ...] | None:
    for var, value in op.pre:
        if state[var] != value:
            return None
    values = list(state)
    for conds, var, new in op.effects:
        if all(state[v] == d for v, d in conds):
            values[var] = new
    return tuple(values)


def greedy_search(
    problem: Problem, init: tuple[int, ...], deadline: float, node_cap: int = 50_000, check_every: int = 32
) -> SearchResult:
    """Eager GBFS with hFF from `init` (ties: older states first) until a goal state, `deadline`
    (`time.monotonic()`), `node_cap` evaluated states, or no open states left."""
    relaxation = relax(problem)
    unit = [1] * len(relaxation.effect)  # ints: no float is made per fact
    goal = problem.goal
    if all(init[var] == value for var, value in goal):
        return SearchResult(Status.SOLVED, [], 0, 1)
    h = h_ff(relaxation, state_facts(relaxation, init), unit)
    if h is None:
        return SearchResult(Status.INCOMPLETE, None, 0, 1)
    parents: dict[tuple[int, ...], tuple[tuple[int, ...] | None, int]] = {init: (None, -1)}
    ticket = count()
    open_list = [(h, next(ticket), init)]
    expanded = 0
    while open_list:
        if expanded % check_every == 0 and time.monotonic() >= deadline:
            return SearchResult(Status.TIMEOUT, None, expanded, len(parents))
        _, _, state = heapq.heappop(open_list)
        expanded += 1
        for index, op in enumerate(problem.operators):
            child = _successor(op, state)
            if child is None or child in parents:
                continue
            parents[child] = (state, index)
            if all(child[var] == value for var, value in goal):
                return SearchResult(Status.SOLVED, _trace(problem, parents, child), expanded, len(parents))
            if len(parents) > node_cap:
                return SearchResult(Status.MEMOUT, None, expanded, len(parents))
            h = h_ff(relaxation, state_facts(relaxation, child), unit)
            if h is not None:
                heapq.heappush(open_list, (h, next(ticket), child))
    return SearchResult(Status.INCOMPLETE, None, expanded, len(parents))


def _trace(
    problem: Problem, parents: dict[tuple[int, ...], tuple[tuple[int, ...] | None, int]], state: tuple[int, ...]
) -> list[str]:
    names: list[str] = []
    while True:
        parent, index = parents[state]
        if parent is None:
            return names[::-1]
        names.append(problem.operators[index].name)
        state = parent
