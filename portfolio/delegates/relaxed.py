"""The delete relaxation of a grounded task, explored once for every heuristic and reachability test of the
in-process searches: h_max, h_add and h_FF, LM-cut's justification graph, and the layers of the relaxed
planning graph.

What: a task's operators split into unary operators, one for each effect, whose conditions are the operator's
precondition and the effect's own conditions, over facts numbered 0..n-1 (`Relaxation`). `explore` is a
generalised Dijkstra from a set of facts (Keyder & Geffner's formulation of h_max and h_add): a unary operator
applies once all its conditions are reached, and reaches its effect at its own cost plus its conditions' costs,
combined by max (h_max) or by sum (h_add). Besides each fact's cost it records each fact's best supporter (the
unary operator its cost came through: h_FF's relaxed plan, under h_add) and each unary operator's condition
reached last (under max, the costliest one: LM-cut's justification graph). With unit costs, h_max of a fact is
its layer in the relaxed planning graph, and a fact never reached is relaxed-unreachable.

Who: `portfolio.delegates.fast_downward.sas_search` (hFF), `sas_astar` (h_max), `sas_landmarks` (LM-cut),
`portfolio.delegates.typed_search` (h_max on bitmask states), `portfolio.delegates.goal_agenda` (layers, with the
operators that would undo a goal left out), `portfolio.agent.give_up` (reachability over predicate names).
`domains.explain` explores the lifted task instead: it must not ground a task it cannot afford to, and `domains`
imports nothing of `portfolio`.

The order is part of the contract (LM-cut's cuts and h_FF's relaxed plans depend on it, and the searches'
expansions on those): the start facts and the effects of unary operators without conditions enter first, facts
are settled in order of (cost, fact number), a fact's watchers in `Relaxation.watchers` order, and a fact keeps the
first supporter that reached it at its final cost. So the start facts go through the heap like any other: settling
them before it saves a few microseconds a call, but where an operator costs 0 it settles ties at cost 0 in another
order, which LM-cut's cuts read.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from operator import add
from typing import NamedTuple

INFINITY = float("inf")


@dataclass(frozen=True)
class Relaxation:
    """The unary operators of a task, over facts numbered 0..`facts`-1."""

    facts: int
    pre_counts: tuple[int, ...]  # per unary operator: how many distinct conditions it has
    effect: tuple[int, ...]  # the fact each unary operator adds
    origin: tuple[int, ...]  # the operator each unary operator comes from (its index in the task)
    pres: tuple[tuple[int, ...], ...]  # per unary operator: its conditions
    watchers: tuple[tuple[int, ...], ...]  # per fact: the unary operators it is a condition of
    free: tuple[int, ...]  # unary operators without conditions
    goal: tuple[int, ...]
    # a task over variables (SAS+): the fact number of (var, value) is offsets[var] + value
    offsets: tuple[int, ...] = ()


def relaxation(
    facts: int, unary: Iterable[tuple[Iterable[int], int, int]], goal: Iterable[int], offsets: Sequence[int] = ()
) -> Relaxation:
    """The relaxation of a task with `facts` facts, from its unary operators as (distinct conditions, effect,
    origin)."""
    pres, effect, origin = [], [], []
    for conditions, added, operator in unary:
        pres.append(tuple(conditions))
        effect.append(added)
        origin.append(operator)
    watchers: list[list[int]] = [[] for _ in range(facts)]
    for index, conditions in enumerate(pres):
        for fact in conditions:
            watchers[fact].append(index)
    return Relaxation(
        facts,
        tuple(len(p) for p in pres),
        tuple(effect),
        tuple(origin),
        tuple(pres),
        tuple(tuple(w) for w in watchers),
        tuple(u for u, p in enumerate(pres) if not p),
        tuple(goal),
        tuple(offsets),
    )


def state_facts(relaxation: Relaxation, state: Sequence[int]) -> list[int]:
    """The facts of a state of a task over variables (one value per variable)."""
    return list(map(add, relaxation.offsets, state))


def unary_costs(relaxation: Relaxation, op_costs: Sequence[float]) -> list[float]:
    """Each unary operator's cost: its operator's (`op_costs` by operator index)."""
    return [op_costs[o] for o in relaxation.origin]


class Exploration(NamedTuple):
    """What `explore` found: lists the caller may go on updating (LM-cut lowers costs in place). A named tuple:
    made once per heuristic evaluation, where a frozen dataclass's slower construction showed."""

    cost: list[float]  # per fact; INFINITY when not reached
    supporter: list[int]  # per fact: the unary operator its cost came through; -1 for a start fact or none
    last_condition: list[int]  # per unary operator: its condition settled last; -1 without any, -2 never applied
    complete: bool  # False when `stop` cut the exploration short


def explore(
    relaxation: Relaxation,
    start: Iterable[int],
    unary_cost: Sequence[float],
    additive: bool = False,
    goal: Collection[int] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Exploration:
    """Each fact's cost from `start` (facts that cost 0) in the relaxed task, a unary operator reaching its effect
    at `unary_cost` (by unary operator; INFINITY leaves it out) plus its conditions' costs combined by max, or by
    sum when `additive`.

    With `goal`, the exploration ends once every goal fact is settled (it reads no further than the costliest
    goal): the goals' costs and supporters and those of every cheaper fact are final, costlier facts may keep a
    cost above their own or none. `stop` is asked each time the exploration moves on to a costlier fact than any
    it has settled (with unit costs: at each layer after the first); once it says yes, the facts settled so far
    keep their costs, every other fact is left unreached, and the result is not `complete`."""
    cost = [INFINITY] * relaxation.facts
    supporter = [-1] * relaxation.facts
    remaining = list(relaxation.pre_counts)
    summed: list[float] = [0] * len(remaining) if additive else []
    last = [-2] * len(remaining)
    effect, watchers = relaxation.effect, relaxation.watchers
    heap: list[tuple[float, int]] = []
    for fact in start:
        if cost[fact]:  # a fact listed twice enters once
            cost[fact] = 0  # an int, as `summed`: with integer costs no float is made (small ints are cached)
            heap.append((0, fact))
    for unary in relaxation.free:
        last[unary] = -1
        target, new = effect[unary], unary_cost[unary]
        if new < cost[target]:
            cost[target], supporter[target] = new, unary
            heap.append((new, target))
    heapq.heapify(heap)
    goals_left = set() if goal is None else set(goal)
    if goal is not None and not goals_left:
        heap = []
    pop, push = heapq.heappop, heapq.heappush
    settled_below = 0.0 if stop is not None else INFINITY  # every fact cheaper than this is settled
    while heap:
        value, fact = pop(heap)
        if value > cost[fact]:
            continue  # reached more cheaply since this entry went in
        if value > settled_below:  # only with a `stop`
            if stop is not None and stop():
                return Exploration([c if c < value else INFINITY for c in cost], supporter, last, False)
            settled_below = value
        if fact in goals_left:
            goals_left.discard(fact)
            if not goals_left:
                break  # what the goals cost is settled; the rest is not read
        for unary in watchers[fact]:
            if additive:
                summed[unary] += value
            left = remaining[unary] - 1
            remaining[unary] = left
            if left == 0:
                last[unary] = fact  # facts settle in order of cost: under max, the last condition is the costliest
                target = effect[unary]
                new = (summed[unary] if additive else value) + unary_cost[unary]
                if new < cost[target]:
                    cost[target], supporter[target] = new, unary
                    push(heap, (new, target))
    return Exploration(cost, supporter, last, True)


def h_max(relaxation: Relaxation, start: Iterable[int], unary_cost: Sequence[float]) -> float | None:
    """h_max from the facts `start`: the costliest goal fact's cost, or None when a goal fact is relaxed-unreachable
    (a dead end). Admissible and consistent."""
    cost = explore(relaxation, start, unary_cost, goal=relaxation.goal).cost
    value = max((cost[fact] for fact in relaxation.goal), default=0.0)
    return None if value == INFINITY else value


def h_ff(relaxation: Relaxation, start: Iterable[int], unary_cost: Sequence[float]) -> int | None:
    """h_FF from the facts `start`: how many operators a relaxed plan uses, or None when a goal fact is
    relaxed-unreachable. The relaxed plan takes each goal fact's best supporter under h_add with `unary_cost`, and
    in turn each of its conditions' (all costs 1.0: Fast Downward's unit-cost `ff()`)."""
    found = explore(relaxation, start, unary_cost, additive=True, goal=relaxation.goal)
    cost, supporter, origin, pres = found.cost, found.supporter, relaxation.origin, relaxation.pres
    if any(cost[fact] == INFINITY for fact in relaxation.goal):
        return None
    chosen: set[int] = set()
    seen: set[int] = set()
    stack = [fact for fact in relaxation.goal if cost[fact] != 0]
    while stack:
        fact = stack.pop()
        if fact in seen:
            continue
        seen.add(fact)
        unary = supporter[fact]
        chosen.add(origin[unary])
        stack.extend(f for f in pres[unary] if cost[f] != 0)
    return len(chosen)


def layers(
    relaxation: Relaxation, start: Iterable[int], left_out: Collection[int] = (), stop: Callable[[], bool] | None = None
) -> Exploration:
    """Each fact's layer in the relaxed planning graph from `start` (layer 0), without the unary operators in
    `left_out`: h_max with unit costs. `stop` as in `explore`, asked before each layer after the first."""
    unit: list[float] = [1] * len(relaxation.effect)
    for unary in left_out:
        unit[unary] = INFINITY
    return explore(relaxation, start, unit, stop=stop)
