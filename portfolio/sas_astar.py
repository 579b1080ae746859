"""A* with h_max over a translated SAS+ task with operator costs, in this process: optimal plans on small tasks.

What: A* (duplicate detection by best g, reopening a state reached more cheaply) guided by h_max (the costliest
single fact the relaxed task needs, with operator costs: admissible and consistent), over the operators of
`portfolio.sas_search.compile_task`. A plan it returns is optimal under the costs it was given.

Why: with costs (learned, or the task's own) the plan must be the cheapest one, and on a small task proving it
takes a search process (`lama-anytime` beside A* with LM-cut, `portfolio.delegates.fd_anytime`) 15-30 ms, most
of it the process itself; a cost-blind replan of the same task is answered in this process by GBFS in 2-3 ms
(`portfolio.sas_search`). This search gives calls with costs the same shortcut: `FastDownward` runs it first on
tasks below its in-process operator threshold and falls back to the processes when it stops (deadline or node
cap: `timeout` / `memout`) or runs out of states (`incomplete`: never `unsolvable`, as in `sas_search`).
Costs are floats (the process search rounds them to thousandths).
"""

from __future__ import annotations

import heapq
import time
from itertools import count
from typing import Sequence

from portfolio.results import Status
from portfolio.sas_search import Problem, Relaxation, SearchResult, _successor, _trace, relax


def h_max(relaxation: Relaxation, op_costs: Sequence[float], state: tuple[int, ...]) -> float | None:
    """The h_max value of `state` (`op_costs` per operator, in `Problem.operators` order), or None when the goal
    is relaxed-unreachable (a dead end)."""
    infinity = float("inf")
    cost = [infinity] * relaxation.facts
    remaining = list(relaxation.pre_counts)
    maxed = [0.0] * len(remaining)
    heap: list[tuple[float, int]] = []
    for var, value in enumerate(state):
        fact = relaxation.offsets[var] + value
        cost[fact] = 0.0
        heap.append((0.0, fact))
    for unary in relaxation.free:
        fact, new = relaxation.effect[unary], op_costs[relaxation.origin[unary]]
        if new < cost[fact]:
            cost[fact] = new
            heap.append((new, fact))
    heapq.heapify(heap)
    goals_left = {fact for fact in relaxation.goal if cost[fact] != 0.0}
    watchers, effect, origin = relaxation.watchers, relaxation.effect, relaxation.origin
    while heap and goals_left:
        value, fact = heapq.heappop(heap)
        if value > cost[fact]:
            continue
        goals_left.discard(fact)
        for unary in watchers[fact]:
            remaining[unary] -= 1
            if value > maxed[unary]:
                maxed[unary] = value
            if remaining[unary] == 0:
                target, new = effect[unary], maxed[unary] + op_costs[origin[unary]]
                if new < cost[target]:
                    cost[target] = new
                    heapq.heappush(heap, (new, target))
    if goals_left:
        return None
    return max((cost[fact] for fact in relaxation.goal), default=0.0)


def astar_search(problem: Problem, op_costs: Sequence[float], init: tuple[int, ...], deadline: float,
                 node_cap: int = 20_000, check_every: int = 32) -> tuple[SearchResult, float | None]:
    """A* with h_max from `init` until the cheapest goal state is expanded, `deadline` (`time.monotonic()`),
    `node_cap` generated states, or no open states left. Returns the result and the plan's cost (None without
    a plan). Ties on f go to the larger g (deeper first)."""
    relaxation = relax(problem)
    goal = problem.goal
    h = h_max(relaxation, op_costs, init)
    if h is None:
        return SearchResult(Status.INCOMPLETE, None, 0, 1), None
    best_g: dict[tuple[int, ...], float] = {init: 0.0}
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
        if all(state[var] == value for var, value in goal):
            return SearchResult(Status.SOLVED, _trace(problem, parents, state), expanded, len(best_g)), g
        expanded += 1
        for index, op in enumerate(problem.operators):
            child = _successor(op, state)
            if child is None:
                continue
            child_g = g + op_costs[index]
            if child_g >= best_g.get(child, float("inf")):
                continue
            h = h_max(relaxation, op_costs, child)
            if h is None:
                continue
            best_g[child], parents[child] = child_g, (state, index)
            if len(best_g) > node_cap:
                return SearchResult(Status.MEMOUT, None, expanded, len(best_g)), None
            heapq.heappush(open_list, (child_g + h, -child_g, next(ticket), child))
    return SearchResult(Status.INCOMPLETE, None, expanded, len(best_g)), None
