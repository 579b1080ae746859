"""LM-cut's landmarks at the root of the in-process A* (`portfolio.delegates.fast_downward.sas_landmarks`): every
plan uses one operator of each, their costs are a cost partition whose sum never overestimates the optimum, and
with them A* proves the same optimum as with h_max alone, expanding fewer states where h_max lets one vehicle wander
while another works."""

from __future__ import annotations

import random
import time

import pytest

from domains.bundled import bundled_task
from domains.validate import validate_plan
from portfolio.delegates.fast_downward import sas_astar
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.fast_downward.sas import operator_action
from portfolio.delegates.fast_downward.sas_landmarks import landmarks
from portfolio.delegates.fast_downward.sas_search import Operator, Problem, compile_task, relax
from portfolio.engine.results import PlanRequest, Status

TASKS = [
    ("logistics", 2, 0),
    ("logistics", 2, 3),
    ("logistics", 3, 1),
    ("tools", 2, 1),
    ("tools", 4, 2),
    ("gripper", 3, 0),
    ("gripper", 4, 2),
    ("blocksworld", 4, 3),
    ("blocksworld", 5, 1),
]


@pytest.fixture(scope="module")
def fd():
    with FastDownward() as delegate:
        yield delegate


def compiled(fd, kind, size, seed):
    """The task's compiled SAS+ problem, random operator costs (0.5-9), and the task itself."""
    task = bundled_task(kind, size, seed=seed)
    translation, _ = fd.translate(PlanRequest(task=task), time.monotonic() + 20)
    rng = random.Random(seed)
    problem = compile_task(translation.sas)
    assert problem is not None
    op_costs = [round(rng.uniform(0.5, 9.0), 3) for _ in problem.operators]
    return problem, op_costs, translation.sas.init, task


@pytest.mark.parametrize("kind,size,seed", TASKS)
def test_every_optimal_plan_uses_each_landmark_and_their_costs_bound_it(fd, kind, size, seed):
    problem, op_costs, init, task = compiled(fd, kind, size, seed)
    marks = landmarks(problem, relax(problem), op_costs, init)
    result, optimum = sas_astar.astar_search(problem, op_costs, init, time.monotonic() + 20)
    assert result.status is Status.SOLVED and optimum is not None and marks
    assert validate_plan(task, [operator_action(name) for name in result.plan]).ok
    used = {index for index, op in enumerate(problem.operators) if op.name in set(result.plan)}
    assert all(ops & used for ops, _ in marks)  # a landmark no plan can avoid
    assert sum(cost for _, cost in marks) <= optimum + 1e-9
    for index, cost in enumerate(op_costs):  # a cost partition: no operator pays out more than it costs
        assert sum(share for ops, share in marks if index in ops) <= cost + 1e-9


@pytest.mark.parametrize("kind,size,seed", TASKS)
def test_the_landmarks_keep_the_optimum(fd, kind, size, seed, monkeypatch):
    problem, op_costs, init, _ = compiled(fd, kind, size, seed)
    with_marks, cost = sas_astar.astar_search(problem, op_costs, init, time.monotonic() + 20)
    monkeypatch.setattr(sas_astar, "landmarks", lambda *args: [])
    without, h_max_cost = sas_astar.astar_search(problem, op_costs, init, time.monotonic() + 20)
    assert with_marks.status is without.status is Status.SOLVED
    assert cost == pytest.approx(h_max_cost, abs=1e-9)


@pytest.mark.parametrize("kind", ["logistics", "tools"])
def test_with_landmarks_a_star_expands_less_than_half_as_many_states(fd, kind, monkeypatch):
    """Several vehicles (logistics) or alternative tools per report (tools): h_max alone lets one vehicle or
    errand wander while another does the work. Measured (size 3, seeds 0-3, costs 0.5-9): logistics 2,453 states
    against 6,668, tools 28 against 407."""
    searches = []
    for seed in range(4):
        problem, op_costs, init, _ = compiled(fd, kind, 3, seed)
        searches.append((problem, op_costs, init))
    with_marks = sum(sas_astar.astar_search(*s, time.monotonic() + 20)[0].expanded for s in searches)
    monkeypatch.setattr(sas_astar, "landmarks", lambda *args: [])
    without = sum(sas_astar.astar_search(*s, time.monotonic() + 20)[0].expanded for s in searches)
    assert with_marks < without / 2


def test_a_task_with_conditional_effects_gets_no_landmarks():
    move = Operator("move", ((0, 0),), (((), 0, 1),))
    switch = Operator("switch", ((0, 1),), ((((1, 0),), 1, 1),))  # sets variable 1 only when it is still 0
    problem = Problem((2, 2), ((1, 1),), (move, switch))
    assert landmarks(problem, relax(problem), [1.0, 2.0], (0, 0)) == []
    result, cost = sas_astar.astar_search(problem, [1.0, 2.0], (0, 0), time.monotonic() + 5)
    assert result.plan == ["move", "switch"] and cost == 3.0
