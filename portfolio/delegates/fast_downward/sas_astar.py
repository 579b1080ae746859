"""A* over a translated SAS+ task with operator costs, in this process: optimal plans on small tasks.

`astar_search(problem, op_costs, init, deadline, node_cap=20_000, check_every=32)` -> (`SearchResult`, the
plan's cost or None). `problem` is `portfolio.delegates.fast_downward.sas_search.compile_task`'s, `op_costs` one
float per operator (the process search rounds them to thousandths), `deadline` a `time.monotonic()` time. A plan
it returns is optimal under the costs it was given. It stops with `timeout` at the deadline, `memout` at the node
cap, and `incomplete` when it runs out of states (never `unsolvable`, as in `sas_search`).

What: A* (duplicate detection by best g, reopening a state reached more cheaply) bounded by the LM-cut landmarks
of the initial state that a path has not used yet (`portfolio.delegates.fast_downward.sas_landmarks`;
admissible), or, on a task without landmarks, by h_max (`portfolio.delegates.relaxed.h_max`: the costliest single
fact the relaxed task needs, with operator costs: admissible and consistent).

Why: with costs (learned, or the task's own) the plan must be the cheapest one, and on a small task a search
process costs more than the search, while a cost-blind replan is answered in this process
(`portfolio.delegates.fast_downward.sas_search`). This search gives calls with costs the same shortcut:
`FastDownward` runs it first on tasks below its in-process operator threshold and falls back to the processes
(`anytime-wastar` beside A* with LM-cut, `portfolio.delegates.fast_downward.anytime`) when it stops. What it
costs against the processes, and why landmarks rather than h_max: `docs/decisions/in-process-astar.md`."""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from itertools import count
from operator import itemgetter

from portfolio.delegates.fast_downward.sas_landmarks import landmarks
from portfolio.delegates.fast_downward.sas_search import (
    Problem,
    SearchResult,
    _successor,
    _trace,
    has_conditional_effects,
    relax,
)
from portfolio.delegates.relaxed import h_max, state_facts, unary_costs
from portfolio.engine.results import Status


def _operators_by_fact(problem: Problem) -> tuple[list[list[list[int]]], list[int]]:
    """Per variable and value, the operators whose precondition on the variable with the largest domain is that
    value; and the operators without preconditions. An expansion then tests only the operators one of whose
    preconditions the state meets, not all of them."""
    by_fact: list[list[list[int]]] = [[[] for _ in range(size)] for size in problem.sizes]
    free = []
    for index, op in enumerate(problem.operators):
        if not op.pre:
            free.append(index)
            continue
        var, value = max(op.pre, key=lambda pre: problem.sizes[pre[0]])
        by_fact[var][value].append(index)
    return by_fact, free


def _goal_test(goal: tuple[tuple[int, int], ...]) -> Callable[[tuple[int, ...]], bool]:
    """Whether a state meets `goal`, as one C-level comparison (`itemgetter`), not a generator per state."""
    if not goal:
        return lambda state: True
    variables, values = zip(*goal, strict=True)
    pick = itemgetter(*variables)
    wanted = values if len(values) > 1 else values[0]
    return lambda state: pick(state) == wanted


def _successors(problem: Problem) -> Callable[[int, tuple[int, ...]], tuple[int, ...] | None]:
    """The successor of a state by an operator (by index), or None where the operator does not apply. Without
    conditional effects each operator's effects are plain assignments, applied without testing conditions, which
    `sas_search._successor`'s tests of empty conditions cost (`docs/decisions/in-process-astar.md`)."""
    operators = problem.operators
    if has_conditional_effects(problem):
        return lambda index, state: _successor(operators[index], state)
    compiled = [(op.pre, [(var, new) for _, var, new in op.effects]) for op in operators]

    def successor(index: int, state: tuple[int, ...]) -> tuple[int, ...] | None:
        pre, effects = compiled[index]
        for var, value in pre:
            if state[var] != value:
                return None
        values = list(state)
        for var, new in effects:
            values[var] = new
        return tuple(values)

    return successor


def astar_search(
    problem: Problem,
    op_costs: Sequence[float],
    init: tuple[int, ...],
    deadline: float,
    node_cap: int = 20_000,
    check_every: int = 32,
) -> tuple[SearchResult, float | None]:
    """A* from `init` until the cheapest goal state is expanded, `deadline` (`time.monotonic()`), `node_cap`
    generated states, or no open states left. Returns the result and the plan's cost (None without a plan). Ties
    on f go to the larger g (deeper first).

    The bound on a state is what the root's LM-cut landmarks that no known path to the state has used cost together
    (`portfolio.delegates.fast_downward.sas_landmarks`): admissible, so the plan is optimal. It costs a mask update
    per child. h_max is evaluated only on a task without landmarks (conditional effects, or a goal relaxed-unreachable
    or already met): at the root (a relaxed-unreachable goal ends the search at once) and lazily for each state
    taken out of the open list (a child enters with its parent's bound less the operator's cost; if its f then
    grows it goes back in). Not beside the landmarks at every state: it costs more than the states it spares
    (`docs/decisions/in-process-astar.md`). What is given up: h_max's dead-end detection at each state; a dead end
    costs the states below it up to the optimum's cost, within the node cap and budget, after which the search
    processes (A* with LM-cut, which detects them) take over."""
    relaxation = relax(problem)
    goal = problem.goal
    costs_of_unary = unary_costs(relaxation, op_costs)
    marks = landmarks(problem, relaxation, op_costs, init)
    # With landmarks their cost bounds the root at least as tightly as h_max (LM-cut dominates it); without any
    # (conditional effects, the goal already met, or relaxed-unreachable) h_max tells a dead end.
    h = 0.0 if marks else h_max(relaxation, state_facts(relaxation, init), costs_of_unary)
    if h is None:
        return SearchResult(Status.INCOMPLETE, None, 0, 1), None
    achieves = [0] * len(problem.operators)  # per operator, the landmarks it uses (a bit each)
    for bit, (ops, _) in enumerate(marks):
        for index in ops:
            achieves[index] |= 1 << bit
    mark_costs = [cost for _, cost in marks]

    def owed(mask: int) -> float:
        """What the landmarks in `mask` cost together."""
        total = 0.0
        while mask:
            low = mask & -mask
            total += mark_costs[low.bit_length() - 1]
            mask ^= low
        return total

    by_fact, free = _operators_by_fact(problem)
    infinity = float("inf")
    is_goal, successor = _goal_test(goal), _successors(problem)
    best_g: dict[tuple[int, ...], float] = {init: 0.0}
    needed: dict[tuple[int, ...], int] = {init: (1 << len(marks)) - 1}  # landmarks some known path has not used
    debt: dict[tuple[int, ...], float] = {init: owed(needed[init])}  # what they cost
    heuristic: dict[tuple[int, ...], float] = {init: h}  # h_max; inf: a dead end
    parents: dict[tuple[int, ...], tuple[tuple[int, ...] | None, int]] = {init: (None, -1)}
    ticket = count()
    h = max(h, debt[init])
    open_list = [(h, 0.0, next(ticket), init)]
    expanded = 0
    while open_list:
        if expanded % check_every == 0 and time.monotonic() >= deadline:
            return SearchResult(Status.TIMEOUT, None, expanded, len(best_g)), None
        f, negative_g, _, state = heapq.heappop(open_list)
        g = -negative_g
        if g > best_g[state]:
            continue  # a cheaper path to it was found after this entry was pushed
        known = heuristic.get(state)
        if known is None and not marks:
            evaluated = h_max(relaxation, state_facts(relaxation, state), costs_of_unary)
            known = heuristic[state] = infinity if evaluated is None else evaluated
        if known == infinity:
            continue
        h = max(known or 0.0, debt[state])
        if g + h > f + 1e-9:
            heapq.heappush(open_list, (g + h, negative_g, next(ticket), state))
            continue
        if is_goal(state):
            return SearchResult(Status.SOLVED, _trace(problem, parents, state), expanded, len(best_g)), g
        expanded += 1
        mask, state_debt = needed[state], debt[state]
        candidates = list(free)
        for var, value in enumerate(state):
            candidates.extend(by_fact[var][value])
        for index in candidates:
            child = successor(index, state)
            if child is None:
                continue
            cost = op_costs[index]
            child_g = g + cost
            if child_g >= best_g.get(child, infinity):
                continue
            used = mask & achieves[index]
            earlier = needed.get(child)
            if earlier is None:  # the parent's debt less what this operator pays off: a few bits, not all
                child_mask, child_debt = mask ^ used, state_debt - owed(used) if used else state_debt
            else:  # a landmark any known path still owes
                child_mask = earlier | (mask ^ used)
                child_debt = debt[child] if child_mask == earlier else owed(child_mask)
            best_g[child], parents[child] = child_g, (state, index)
            needed[child], debt[child] = child_mask, child_debt
            if len(best_g) > node_cap:
                return SearchResult(Status.MEMOUT, None, expanded, len(best_g)), None
            bound = heuristic.get(child)
            if bound is None:
                bound = max(h - cost, 0.0)
            elif bound == infinity:
                continue
            bound = max(bound, child_debt)
            heapq.heappush(open_list, (child_g + bound, -child_g, next(ticket), child))
    return SearchResult(Status.INCOMPLETE, None, expanded, len(best_g)), None
