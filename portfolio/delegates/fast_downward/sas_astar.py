"""A* with h_max over a translated SAS+ task with operator costs, in this process: optimal plans on small tasks.

What: A* (duplicate detection by best g, reopening a state reached more cheaply) guided by h_max (the costliest
single fact the relaxed task needs, with operator costs: admissible and consistent), over the operators of
`portfolio.delegates.fast_downward.sas_search.compile_task`. A plan it returns is optimal under the costs it was given.

Why: with costs (learned, or the task's own) the plan must be the cheapest one, and on a small task proving it
takes a search process (`anytime-wastar` beside A* with LM-cut, `portfolio.delegates.fast_downward.anytime`) 15-30 ms,
most
of it the process itself; a cost-blind replan of the same task is answered in this process by GBFS in 2-3 ms
(`portfolio.delegates.fast_downward.sas_search`). This search gives calls with costs the same shortcut: `FastDownward`
runs it first on
tasks below its in-process operator threshold and falls back to the processes when it stops (deadline or node
cap: `timeout` / `memout`) or runs out of states (`incomplete`: never `unsolvable`, as in `sas_search`).
Costs are floats (the process search rounds them to thousandths).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from itertools import count

from portfolio.delegates.fast_downward.sas_search import Problem, Relaxation, SearchResult, _successor, _trace, relax
from portfolio.engine.results import Status


def h_max(
    relaxation: Relaxation, op_costs: Sequence[float], state: tuple[int, ...], per_unary: Sequence[float] | None = None
) -> float | None:
    """The h_max value of `state` (`op_costs` per operator, in `Problem.operators` order), or None when the goal
    is relaxed-unreachable (a dead end). `per_unary` (`unary_costs(relaxation, op_costs)`, once per search)
    saves looking each unary operator's cost up through its operator.

    The state's own facts cost 0 and need no ordering, so they are settled before the heap starts: only facts
    reached through operators go through it. Measured on the learned vehicle-roads calls of `portfolio bench
    learning` (90 A* searches, 23,183 expansions; CPU time): 1.74-1.86 s before, 1.56-1.62 s after (the same plans)."""
    if per_unary is None:
        per_unary = unary_costs(relaxation, op_costs)
    infinity = float("inf")
    cost = [infinity] * relaxation.facts
    remaining = list(relaxation.pre_counts)
    maxed = [0.0] * len(remaining)
    effect, watchers = relaxation.effect, relaxation.watchers
    goals_left = set(relaxation.goal)
    heap: list[tuple[float, int]] = []
    reached: list[int] = []  # unary operators whose conditions the state alone meets
    offsets = relaxation.offsets
    for var, val in enumerate(state):
        fact = offsets[var] + val
        cost[fact] = 0.0
        goals_left.discard(fact)
        for unary in watchers[fact]:
            remaining[unary] -= 1
            if remaining[unary] == 0:
                reached.append(unary)
    if not goals_left:
        return 0.0
    for unary in (*relaxation.free, *reached):
        fact, new = effect[unary], per_unary[unary]
        if new < cost[fact]:
            cost[fact] = new
            heap.append((new, fact))
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        value, fact = pop(heap)
        if value > cost[fact]:
            continue
        if fact in goals_left:
            goals_left.discard(fact)
            if not goals_left:
                return value  # facts come out in order of cost: the last goal out is the costliest
        for unary in watchers[fact]:
            left = remaining[unary] - 1
            remaining[unary] = left
            if value > maxed[unary]:
                maxed[unary] = value
            if left == 0:
                target, new = effect[unary], maxed[unary] + per_unary[unary]
                if new < cost[target]:
                    cost[target] = new
                    push(heap, (new, target))
    return None


def unary_costs(relaxation: Relaxation, op_costs: Sequence[float]) -> list[float]:
    """Each unary operator's cost (its operator's): what `h_max` reads, computed once per search."""
    return [op_costs[o] for o in relaxation.origin]


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


def astar_search(
    problem: Problem,
    op_costs: Sequence[float],
    init: tuple[int, ...],
    deadline: float,
    node_cap: int = 20_000,
    check_every: int = 32,
) -> tuple[SearchResult, float | None]:
    """A* with h_max from `init` until the cheapest goal state is expanded, `deadline` (`time.monotonic()`),
    `node_cap` generated states, or no open states left. Returns the result and the plan's cost (None without
    a plan). Ties on f go to the larger g (deeper first).

    h_max is evaluated lazily: a child enters the open list with its parent's h less the operator's cost (a lower
    bound, h_max being consistent) and is evaluated when it comes out; if its f then grows it goes back in. Most
    children of an optimal search are never taken out, and h_max is most of the time: measured on the learned
    detours calls of `portfolio bench learning` (80 operators), with the operator index, 2.09 -> 1.91 ms at the
    median."""
    relaxation = relax(problem)
    goal = problem.goal
    costs_of_unary = unary_costs(relaxation, op_costs)
    h = h_max(relaxation, op_costs, init, costs_of_unary)
    if h is None:
        return SearchResult(Status.INCOMPLETE, None, 0, 1), None
    by_fact, free = _operators_by_fact(problem)
    operators, infinity = problem.operators, float("inf")
    best_g: dict[tuple[int, ...], float] = {init: 0.0}
    heuristic: dict[tuple[int, ...], float] = {init: h}  # inf: a dead end
    parents: dict[tuple[int, ...], tuple[tuple[int, ...] | None, int]] = {init: (None, -1)}
    ticket = count()
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
        if known is None:
            evaluated = h_max(relaxation, op_costs, state, costs_of_unary)
            known = heuristic[state] = infinity if evaluated is None else evaluated
            if known != infinity and g + known > f:
                heapq.heappush(open_list, (g + known, negative_g, next(ticket), state))
                continue
        if known == infinity:
            continue
        h = known
        if all(state[var] == value for var, value in goal):
            return SearchResult(Status.SOLVED, _trace(problem, parents, state), expanded, len(best_g)), g
        expanded += 1
        candidates = list(free)
        for var, value in enumerate(state):
            candidates.extend(by_fact[var][value])
        for index in candidates:
            child = _successor(operators[index], state)
            if child is None:
                continue
            cost = op_costs[index]
            child_g = g + cost
            if child_g >= best_g.get(child, infinity):
                continue
            best_g[child], parents[child] = child_g, (state, index)
            if len(best_g) > node_cap:
                return SearchResult(Status.MEMOUT, None, expanded, len(best_g)), None
            bound = heuristic.get(child)
            if bound is None:
                bound = max(h - cost, 0.0)
            elif bound == infinity:
                continue
            heapq.heappush(open_list, (child_g + bound, -child_g, next(ticket), child))
    return SearchResult(Status.INCOMPLETE, None, expanded, len(best_g)), None
