"""The delete-relaxation core (`portfolio.delegates.relaxed`): h_max, h_add, h_FF and the relaxed planning graph's
layers, on a hand-worked task and against brute force (a fixpoint, the layered graph, the optimal relaxed plan)
on small random ones."""

from __future__ import annotations

import itertools
import random

import pytest

from portfolio.delegates.relaxed import INFINITY, explore, h_ff, h_max, layers, relaxation

# facts a=0, b=1, c=2, d=3, g=4, e=5; operators (conditions, effects, cost)
A, B, C, D, G, E = range(6)
HAND = [({A}, [B], 2.0), ({A}, [C], 3.0), ({B, C}, [G], 1.0), (set(), [D], 5.0), ({D}, [G], 1.0)]


def _relaxation(operators, facts, goal):
    unary = [(sorted(pre), added, index) for index, (pre, adds, _) in enumerate(operators) for added in adds]
    return relaxation(facts, unary, goal)


def _costs(task, operators):
    return [operators[o][2] for o in task.origin]


def test_a_hand_worked_task():
    task = _relaxation(HAND, 6, [G])
    costs = _costs(task, HAND)
    # h_max: b 2, c 3, g through (b, c) max(2, 3) + 1 = 4 (through d: 5 + 1)
    assert h_max(task, [A], costs) == 4.0
    # h_add: g costs 2 + 3 + 1 = 6 either way; the supporter that reached 6 first, (b, c), is kept: three operators
    found = explore(task, [A], costs, additive=True)
    assert found.cost == [0.0, 2.0, 3.0, 5.0, 6.0, INFINITY] and found.supporter[G] == 2
    assert h_ff(task, [A], costs) == 3
    # unit costs: layers a 0, b c d 1, g 2; h_FF's relaxed plan is the free operator and d's
    assert layers(task, [A]).cost == [0.0, 1.0, 1.0, 1.0, 2.0, INFINITY]
    assert h_ff(task, [A], [1.0] * len(task.effect)) == 2
    # the justification graph: (b, c) -> g hangs on c, the costlier (with unit costs, the later-numbered of two ties)
    assert explore(task, [A], costs).last_condition == [A, A, C, -1, D]
    assert explore(task, [], costs).last_condition == [-2, -2, -2, -1, D]
    assert h_max(task, [A, A, B], costs) == h_max(task, [B, A], costs) == 4.0


def test_unreachable_goals_and_operators_left_out():
    task = _relaxation(HAND, 6, [G, E])
    assert h_max(task, [A], _costs(task, HAND)) is None and h_ff(task, [A], _costs(task, HAND)) is None
    assert h_max(_relaxation(HAND, 6, []), [], _costs(task, HAND)) == 0.0
    assert h_max(_relaxation(HAND, 6, [A]), [A], _costs(task, HAND)) == 0.0
    assert layers(task, [A], left_out={2}).cost[G] == 2.0  # through d
    assert layers(task, [A], left_out={2, 4}).cost[G] == INFINITY


def test_a_stop_keeps_the_layers_completed_before_it():
    task = _relaxation(HAND, 6, [G])
    asked = []
    cut = layers(task, [A], stop=lambda: asked.append(1) or len(asked) == 2)
    assert not cut.complete and cut.cost == [0.0, 1.0, 1.0, 1.0, INFINITY, INFINITY]
    assert layers(task, [A], stop=lambda: True).cost == [0.0] + [INFINITY] * 5
    assert layers(task, [A], stop=lambda: False).complete


def _random_task(rng):
    facts = rng.randint(2, 7)
    operators = []
    for _ in range(rng.randint(1, 7)):
        pre = set(rng.sample(range(facts), rng.randint(0, 2)))
        operators.append((pre, rng.sample(range(facts), rng.randint(1, 2)), float(rng.randint(0, 4))))
    goal = rng.sample(range(facts), rng.randint(1, 2))
    start = rng.sample(range(facts), rng.randint(0, 2))
    return facts, operators, goal, start


def _fixpoint(facts, operators, start, combine):
    """Each fact's cost by iterating the defining equations until nothing changes."""
    cost = [0.0 if f in start else INFINITY for f in range(facts)]
    changed = True
    while changed:
        changed = False
        for pre, adds, c in operators:
            reach = combine([cost[f] for f in pre]) + c
            for f in adds:
                if reach < cost[f]:
                    cost[f], changed = reach, True
    return cost


def _layered(facts, operators, start):
    """The relaxed planning graph, layer by layer."""
    level = {f: 0 for f in start}
    layer = 0
    while True:
        layer += 1
        new = {f for pre, adds, _ in operators if pre <= level.keys() for f in adds if f not in level}
        if not new:
            return [level.get(f, INFINITY) for f in range(facts)]
        level.update(dict.fromkeys(new, layer))


def _h_plus(facts, operators, start, goal):
    """The fewest operators of any relaxed plan (every subset of operators tried, smallest first)."""
    for size in range(len(operators) + 1):
        for chosen in itertools.combinations(operators, size):
            if set(goal) <= {f for f, c in enumerate(_layered(facts, chosen, start)) if c != INFINITY}:
                return size
    return None


def test_the_core_agrees_with_brute_force():
    rng = random.Random(3)
    for _ in range(600):
        facts, operators, goal, start = _random_task(rng)
        task = _relaxation(operators, facts, goal)
        costs = _costs(task, operators)
        by_max = _fixpoint(facts, operators, start, lambda values: max(values, default=0.0))
        by_sum = _fixpoint(facts, operators, start, sum)
        full = explore(task, start, costs)
        assert full.cost == by_max
        assert explore(task, start, costs, additive=True).cost == by_sum
        goal_cost = max(by_max[g] for g in goal)
        assert h_max(task, start, costs) == (None if goal_cost == INFINITY else goal_cost)
        assert layers(task, start).cost == _layered(facts, operators, start)
        for unary, last in enumerate(full.last_condition):  # the costliest condition, or none
            pres = task.pres[unary]
            if any(by_max[f] == INFINITY for f in pres):
                assert last == -2
            else:
                assert last == -1 if not pres else by_max[last] == max(by_max[f] for f in pres)
        unit = [1.0] * len(task.effect)
        ff, plus = h_ff(task, start, unit), _h_plus(facts, operators, start, goal)
        assert (ff is None) == (plus is None)
        if ff is not None:  # h_max <= h+ <= h_FF <= h_add, with unit costs
            unit_max = max(_layered(facts, operators, start)[g] for g in goal)
            unit_add = sum(_fixpoint(facts, [(p, a, 1.0) for p, a, _ in operators], start, sum)[g] for g in set(goal))
            assert unit_max <= plus <= ff <= unit_add


@pytest.mark.parametrize("additive", [False, True])
def test_a_goal_ends_the_exploration_with_the_goals_costs_final(additive):
    rng = random.Random(9)
    for _ in range(300):
        facts, operators, goal, start = _random_task(rng)
        task = _relaxation(operators, facts, goal)
        costs = _costs(task, operators)
        full = explore(task, start, costs, additive=additive)
        early = explore(task, start, costs, additive=additive, goal=goal)
        assert [early.cost[g] for g in goal] == [full.cost[g] for g in goal]
        assert [early.supporter[g] for g in goal] == [full.supporter[g] for g in goal]
