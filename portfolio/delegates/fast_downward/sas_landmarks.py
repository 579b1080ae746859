"""LM-cut's disjunctive action landmarks of a SAS+ task with operator costs, computed once, at the search's root.

`landmarks(problem, relaxation, op_costs, state)` -> a list of (operator indices, cost) pairs: each a set of
operators every plan from `state` uses at least one of, and its cost. The costs are a cost partition (no operator
pays out more than its cost in total), so the costs of the landmarks a plan has still to use add up to a lower
bound on what it has left to pay. No landmarks (an empty list) for a task with conditional effects (where a unary
operator's firing would not be its operator's) or a goal relaxed-unreachable from `state`.

How: the LM-cut procedure (Helmert & Domshlak 2009) over the unary relaxation of
`portfolio.delegates.fast_downward.sas_search.relax`: compute h_max with the remaining costs, take the cut that
separates the state from the goal zone in the justification graph (each unary operator's costliest condition to
its effect), record the cut's operators as a landmark of cost m (the cut's cheapest remaining cost), take m off
each of them, and repeat until the goal costs nothing.

Why: it bounds the in-process A* (`portfolio.delegates.fast_downward.sas_astar`) where h_max alone prices only the
costliest single fact, so a vehicle that wanders while another works costs the bound nothing. A landmark nothing
on a path has used yet is still owed, so the search adds the costs of the landmarks a path has not used to its
bound (path-dependent, as LM-A*: Karpas & Domshlak 2009): a move that uses none of them raises f by its full cost.
Computed once per search, each child then costs a mask update, not a heuristic evaluation (what it costs and
saves: `docs/decisions/in-process-astar.md`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from portfolio.delegates.fast_downward.sas_search import Problem, has_conditional_effects
from portfolio.delegates.relaxed import Relaxation, explore, state_facts

# Each cut brings at least one operator's remaining cost to zero, so there are at most as many landmarks as
# operators (66 on the 240-operator vehicle-roads tasks); this cap only bounds the time on a larger task, keeping
# the landmarks found so far (any subset of them is still a valid bound).
MAX_LANDMARKS = 256
_ZERO = 1e-9


def landmarks(
    problem: Problem, relaxation: Relaxation, op_costs: Sequence[float], state: tuple[int, ...]
) -> list[tuple[frozenset[int], float]]:
    """LM-cut's landmarks of `state` under `op_costs`: (operator indices, cost) pairs, or none when the task has
    conditional effects or the goal is relaxed-unreachable from `state`.

    h_max is computed once and then kept up to date as the cuts lower costs (costs only go down, so only the
    facts below a cut operator's effects move: `_lower`), as Fast Downward's LM-cut does; the goal zone and the
    cut are found by walking the justification graph from its ends, not by a pass over every operator."""
    if has_conditional_effects(problem):
        return []
    remaining_cost = [float(c) for c in op_costs]
    origin, effect = relaxation.origin, relaxation.effect
    unary_of: list[list[int]] = [[] for _ in remaining_cost]
    achievers: list[list[int]] = [[] for _ in range(relaxation.facts)]
    for unary, (op, target) in enumerate(zip(origin, effect, strict=True)):
        unary_of[op].append(unary)
        achievers[target].append(unary)
    unary_cost = [remaining_cost[o] for o in origin]
    held = state_facts(relaxation, state)
    # h_max, and each unary operator's costliest condition (its precondition choice; -1 for an operator without
    # conditions, -2 for one never reached)
    explored = explore(relaxation, held, unary_cost)
    cost, choice = explored.cost, explored.last_condition
    free = [u for u in relaxation.free if choice[u] == -1]
    found: list[tuple[frozenset[int], float]] = []
    while len(found) < MAX_LANDMARKS:
        goal = max(relaxation.goal, key=cost.__getitem__, default=None)
        if goal is None or cost[goal] <= _ZERO:
            return found
        if cost[goal] == float("inf"):
            return []
        cut = _cut(relaxation, held, free, choice, _goal_zone(goal, achievers, choice, unary_cost))
        m = min(remaining_cost[o] for o in cut)
        lowered = []
        for o in cut:
            left = remaining_cost[o] - m
            remaining_cost[o] = left if left > _ZERO else 0.0
            for unary in unary_of[o]:
                unary_cost[unary] = remaining_cost[o]
                lowered.append(unary)
        found.append((frozenset(cut), m))
        _lower(relaxation, cost, choice, unary_cost, lowered)
    return found


def _goal_zone(goal: int, achievers: list[list[int]], choice: list[int], unary_cost: list[float]) -> set[int]:
    """The facts that reach `goal` (the costliest) in the justification graph through operators that now cost
    nothing."""
    zone = {goal}
    stack = [goal]
    while stack:
        for unary in achievers[stack.pop()]:
            source = choice[unary]
            if source >= 0 and unary_cost[unary] <= _ZERO and source not in zone:
                zone.add(source)
                stack.append(source)
    return zone


def _cut(relaxation: Relaxation, held: list[int], free: list[int], choice: list[int], zone: set[int]) -> set[int]:
    """The operators on an edge of the justification graph from what the state reaches outside `zone` into it:
    the walk starts at the state's facts and the operators without conditions, and follows each unary
    operator from its costliest condition (`choice`) to its effect."""
    effect, origin, watchers = relaxation.effect, relaxation.origin, relaxation.watchers
    cut: set[int] = set()
    reach = set(held)
    stack = list(held)

    def follow(unary: int) -> None:
        target = effect[unary]
        if target in zone:
            cut.add(origin[unary])
        elif target not in reach:
            reach.add(target)
            stack.append(target)

    for unary in free:
        follow(unary)
    while stack:
        fact = stack.pop()
        for unary in watchers[fact]:
            if choice[unary] == fact:
                follow(unary)
    return cut


def _lower(
    relaxation: Relaxation, cost: list[float], choice: list[int], unary_cost: list[float], lowered: list[int]
) -> None:
    """Bring h_max (`cost`) and each unary operator's costliest condition (`choice`) up to date after the unary
    operators in `lowered` got cheaper: Dijkstra from their effects, costs only going down."""
    effect, watchers, pres = relaxation.effect, relaxation.watchers, relaxation.pres
    heap: list[tuple[float, int]] = []
    for unary in lowered:
        source = choice[unary]
        if source == -2:
            continue  # never reached: lower costs do not reach it either
        new = (cost[source] if source >= 0 else 0.0) + unary_cost[unary]
        target = effect[unary]
        if new < cost[target]:
            cost[target] = new
            heap.append((new, target))
    heapq.heapify(heap)
    while heap:
        value, fact = heapq.heappop(heap)
        if value > cost[fact]:
            continue
        for unary in watchers[fact]:
            if choice[unary] == -2:
                continue
            source = max(pres[unary], key=cost.__getitem__)
            choice[unary] = source
            new = cost[source] + unary_cost[unary]
            target = effect[unary]
            if new < cost[target]:
                cost[target] = new
                heapq.heappush(heap, (new, target))
