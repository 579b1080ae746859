"""Transition check: the relaxation core (`portfolio.delegates.relaxed`) against the explorations it replaces,
on translated tasks and the states of random walks from their initial states."""

from __future__ import annotations

import random
import time

import pytest
from support import IPC

from domains.bundled import bundled_task
from domains.load import load_task
from portfolio.delegates import goal_agenda, relaxed
from portfolio.delegates.fast_downward import sas_astar, sas_landmarks, sas_search
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.engine.results import PlanRequest

TASKS = [
    ("bundled", "tools", 2),
    ("bundled", "logistics", 1),
    ("bundled", "gripper", 2),
    ("ipc", "blocks", "probBLOCKS-6-0.pddl"),
    ("ipc", "driverlog", "p01.pddl"),
    ("ipc", "miconic", "s1-0.pddl"),
    ("ipc", "visitall-opt11-strips", "problem02-full.pddl"),
    ("ipc", "depot", "p01.pddl"),
    ("ipc", "elevators-sat08-strips", "p01.pddl"),
]


def _task(spec):
    if spec[0] == "bundled":
        return bundled_task(spec[1], spec[2], seed=1)
    folder = IPC if spec[0] == "ipc" else IPC.parent / "ipc-more"
    return load_task(folder / spec[1] / "domain.pddl", folder / spec[1] / spec[2])


def _core(problem):
    offsets, total = [], 0
    for size in problem.sizes:
        offsets.append(total)
        total += size
    unary = [
        ({offsets[v] + d for v, d in (*op.pre, *conds)}, offsets[var] + new, index)
        for index, op in enumerate(problem.operators)
        for conds, var, new in op.effects
    ]
    return relaxed.relaxation(total, unary, [offsets[v] + d for v, d in problem.goal], offsets)


@pytest.mark.parametrize("spec", TASKS, ids=lambda s: "-".join(map(str, s)))
def test_the_core_computes_what_the_old_explorations_did(spec):
    with FastDownward() as fd:
        translation, _ = fd.translate(PlanRequest(task=_task(spec)), time.monotonic() + 60)
    sas = translation.sas
    problem = sas_search.compile_task(sas)
    old, new = sas_search.relax(problem), _core(problem)
    assert (old.pres, old.watchers, old.free, old.goal, old.effect, old.origin) == (
        new.pres, new.watchers, new.free, new.goal, new.effect, new.origin
    )  # fmt: skip
    rng = random.Random(5)
    op_costs = [rng.choice([0.0, 1.0, round(rng.uniform(0.5, 9.0), 3)]) for _ in problem.operators]
    per_unary = relaxed.unary_costs(new, op_costs)
    unit = [1.0] * len(new.effect)
    ops = goal_agenda.relaxed_operators(sas)
    states, state = [sas.init], sas.init
    for _ in range(40):
        children = [c for op in problem.operators if (c := sas_search._successor(op, state)) is not None]
        if not children:
            break
        state = rng.choice(children)
        states.append(state)
    for state in states:
        facts = relaxed.state_facts(new, state)
        assert relaxed.h_ff(new, facts, unit) == sas_search.h_ff(old, state)
        assert relaxed.h_max(new, facts, per_unary) == sas_astar.h_max(old, op_costs, state)
        cost, choice = sas_landmarks._h_max_with_supporters(old, per_unary, state)
        found = relaxed.explore(new, facts, per_unary)
        assert (found.cost, found.last_condition) == (cost, choice)
        levels = goal_agenda.relaxed_levels(ops, set(enumerate(state)))
        layered = relaxed.layers(new, facts).cost
        fact_of = [(var, value) for var, size in enumerate(problem.sizes) for value in range(size)]
        assert {fact_of[f]: int(c) for f, c in enumerate(layered) if c != relaxed.INFINITY} == levels
    assert sas_landmarks.landmarks(problem, old, op_costs, sas.init) is not None


def _random_problem(rng):
    sizes = tuple(rng.randint(2, 4) for _ in range(rng.randint(2, 6)))
    fact = lambda: (v := rng.randrange(len(sizes)), rng.randrange(sizes[v]))  # noqa: E731
    operators = []
    for index in range(rng.randint(1, 14)):
        pre = tuple(dict(fact() for _ in range(rng.randint(0, 2))).items())
        effects = []
        for var in rng.sample(range(len(sizes)), rng.randint(1, 2)):
            conds = tuple(dict(fact() for _ in range(rng.choice([0, 0, 1, 2]))).items())
            effects.append((conds, var, rng.randrange(sizes[var])))
        operators.append(sas_search.Operator(f"op{index}", pre, tuple(effects)))
    goal = tuple(dict(fact() for _ in range(rng.randint(1, 3))).items())
    return sas_search.Problem(sizes, goal, tuple(operators))


def test_the_core_agrees_on_random_tasks_with_conditional_effects():
    rng = random.Random(11)
    for _ in range(1500):
        problem = _random_problem(rng)
        old, new = sas_search.relax(problem), _core(problem)
        op_costs = [rng.choice([0.0, 1.0, 2.5, round(rng.uniform(0.5, 9.0), 3)]) for _ in problem.operators]
        per_unary = relaxed.unary_costs(new, op_costs)
        unit = [1.0] * len(new.effect)
        state = tuple(rng.randrange(size) for size in problem.sizes)
        facts = relaxed.state_facts(new, state)
        assert relaxed.h_ff(new, facts, unit) == sas_search.h_ff(old, state)
        assert relaxed.h_max(new, facts, per_unary) == sas_astar.h_max(old, op_costs, state)
        cost, choice = sas_landmarks._h_max_with_supporters(old, per_unary, state)
        found = relaxed.explore(new, facts, per_unary)
        assert (found.cost, found.last_condition) == (cost, choice)
        ops = [
            goal_agenda.RelaxedOp(
                op.pre,
                tuple((var, val) for conds, var, val in op.effects if not conds),
                tuple((conds, (var, val)) for conds, var, val in op.effects if conds),
            )
            for op in problem.operators
        ]
        fact_of = [(var, value) for var, size in enumerate(problem.sizes) for value in range(size)]
        start = set(enumerate(state)) | {fact_of[rng.randrange(len(fact_of))]}
        banned = fact_of[rng.randrange(len(fact_of))]
        levels = goal_agenda.relaxed_levels(ops, start, banned_var=banned[0], kept_value=banned[1])
        undoing = {
            index for index, op in enumerate(ops) if any(v == banned[0] and d != banned[1] for v, d in op.effects)
        }
        left_out = {
            unary
            for unary, (target, origin) in enumerate(zip(new.effect, new.origin))
            if origin in undoing or (fact_of[target][0] == banned[0] and fact_of[target][1] != banned[1])
        }
        layered = relaxed.layers(new, [new.offsets[v] + d for v, d in start], left_out).cost
        assert {fact_of[f]: int(c) for f, c in enumerate(layered) if c != relaxed.INFINITY} == levels
