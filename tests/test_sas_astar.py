"""A* with h_max in this process (`portfolio.delegates.fast_downward.sas_astar`): on small tasks with costs its plan is
the optimum Fast
Downward's A* with LM-cut proves, h_max never overestimates it, and a search that stops hands over to the
search processes."""

from __future__ import annotations

import random
import time

import pytest

from domains.bundled import bundled_task
from domains.validate import validate_plan
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.fast_downward.sas_astar import astar_search
from portfolio.delegates.fast_downward.sas_search import compile_task, relax
from portfolio.delegates.relaxed import h_max, state_facts, unary_costs
from portfolio.engine.results import PlanRequest, Status

TASKS = [("tools", 1, 0), ("tools", 2, 1), ("gripper", 2, 0), ("blocksworld", 4, 3), ("logistics", 1, 2)]


def random_costs(seed: int):
    rng = random.Random(seed)
    memo: dict[str, float] = {}
    return lambda grounded: {g: memo.setdefault(g, round(rng.uniform(0.5, 9.0), 3)) for g in grounded}


@pytest.fixture(scope="module")
def fd():
    with FastDownward() as delegate:
        yield delegate


@pytest.mark.parametrize("kind,size,seed", TASKS)
def test_the_in_process_plan_is_the_proved_optimum(fd, kind, size, seed):
    task = bundled_task(kind, size, seed=seed)
    cost_model = random_costs(seed)
    outcome = fd.solve(PlanRequest(task=task, cost_function=cost_model), time.monotonic() + 20)
    with FastDownward(alias="seq-opt-lmcut") as exact:
        proved = exact.solve(PlanRequest(task=task, cost_function=cost_model), time.monotonic() + 20)
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
    assert outcome.details["search"] == "in-process-astar" and outcome.details["optimal"] is True
    costs = cost_model([str(step) for step in outcome.plan + proved.plan])
    ours, optimum = (sum(costs[str(s)] for s in plan) for plan in (outcome.plan, proved.plan))
    assert ours == pytest.approx(optimum, abs=0.002 * len(proved.plan))  # the processes round to thousandths
    assert outcome.details["plans"][0]["cost"] == pytest.approx(ours, abs=0.001)


@pytest.mark.parametrize("kind,size,seed", TASKS)
def test_h_max_never_overestimates_the_optimum(fd, kind, size, seed):
    task = bundled_task(kind, size, seed=seed)
    translation, _ = fd.translate(PlanRequest(task=task), time.monotonic() + 20)
    problem = compile_task(translation.sas)
    costs = random_costs(seed)([f"({op.name})" for op in translation.sas.operators])
    op_costs = [costs[f"({op.name})"] for op in translation.sas.operators]
    result, cost = astar_search(problem, op_costs, translation.sas.init, time.monotonic() + 10)
    assert result.status is Status.SOLVED
    relaxation = relax(problem)
    h = h_max(relaxation, state_facts(relaxation, translation.sas.init), unary_costs(relaxation, op_costs))
    assert h is not None and h <= cost + 1e-9


def test_a_search_that_stops_hands_over_to_the_processes():
    task = bundled_task("tools", 2, seed=1)
    with FastDownward(inprocess_node_cap=2) as fd:
        outcome = fd.solve(PlanRequest(task=task, cost_function=random_costs(1)), time.monotonic() + 20)
        first = fd.solve(PlanRequest(task=task, cost_function=random_costs(1), quality="first"), time.monotonic() + 20)
    assert outcome.details["in_process"]["status"] == "memout"
    assert outcome.status is Status.SOLVED and outcome.details["search"] in ("anytime-wastar", "seq-opt-lmcut")
    assert validate_plan(task, outcome.plan).ok
    assert "in_process" not in first.details  # "first" asked for the first cost-aware plan of the processes
