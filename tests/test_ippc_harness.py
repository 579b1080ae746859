"""The IPPC harness (benchmarks/experiments/ippc.py) determinizes PPDDL as documented and its simulator samples
outcomes with the domain's probabilities. On the problems of its four domains committed in tests/data/ippc (the
benchmark reads the IPPC sets by path); the planning arms run in the benchmark."""

from __future__ import annotations

import random

import pytest
from support import IPPC

from benchmarks.experiments.ippc import clean_problem, determinize, read_domain, simulate
from domains.model import GroundAction
from domains.pddl import parse_task


def load(domain: str, problem: str = "p01.pddl"):
    path = next((IPPC / domain).glob(problem))
    det = determinize(read_domain(IPPC / domain, path))
    text = clean_problem(path.read_text())
    return det, parse_task(det.planning_domain, text), parse_task(det.simulation_domain, text)


def test_intended_outcomes():
    det, task, sim = load("blocksworld")
    assert det.p_intended("pick-tower") == pytest.approx(0.1)  # its listed outcome is its purpose
    assert det.p_intended("pick-up") == pytest.approx(0.75) and det.p_intended("put-down") == 1.0
    assert {a.name for a in task.domain.actions} == {
        "pick-up",
        "pick-up-from-table",
        "put-on-block",
        "put-down",
        "pick-tower",
        "put-tower-on-block",
        "put-tower-down",
    }
    assert task.problem.goal is not None and "pick-tower--o1" in {a.name for a in sim.domain.actions}
    exploding, _, _ = load("ex-blocksworld-fixed")
    assert exploding.p_intended("put-down") == pytest.approx(0.6)  # a side effect: nothing happening is intended


def test_simulator_samples_the_domains_probabilities():
    det, task, sim = load("blocksworld")
    state = task.problem.init
    clear = sorted(a.args[0] for a in state if a.predicate == "clear")
    below = {a.args[0]: a.args[1] for a in state if a.predicate == "on"}
    top = next(b for b in clear if b in below)
    step = GroundAction("pick-up", (top, below[top]))
    rng = random.Random(0)
    outcomes = [simulate(det, sim, state, step, rng) for _ in range(2000)]
    intended = [ok for _, ok in outcomes]
    assert abs(sum(intended) / len(intended) - 0.75) < 0.04
    held = next(s for s, ok in outcomes if ok)
    dropped = next(s for s, ok in outcomes if not ok)
    assert any(a.predicate == "holding" for a in held) and not any(a.predicate == "holding" for a in dropped)


def test_nested_outcomes_and_rewards():
    """boxworld: the domain is in each problem file, a wrong drive (0.2) lands in one of three wrong cities (a
    probabilistic block inside forall/when inside another), and unloading at the destination earns a reward;
    zenotravel: `(and (decrease reward 10) (probabilistic 1/25 ...))` is the probabilistic effect alone."""
    det, task, sim = load("boxworld", "p02-*.pddl")
    drive = det.actions["drive-truck"]
    assert [round(o.probability, 4) for o in drive.outcomes] == [0.0667, 0.0667, 0.0667, 0.8]
    assert det.p_intended("drive-truck") == pytest.approx(0.8) and det.p_intended("fly-plane") == 1.0
    assert "reward" not in det.planning_domain and "reward" not in det.simulation_domain
    state = task.problem.init
    truck, city = next(a.args for a in state if a.predicate == "truck-at-city")
    target = sorted(a.args[1] for a in state if a.predicate == "can-drive" and a.args[0] == city)[0]
    wrong = {a.args[1] for a in state if a.predicate.startswith("wrong-drive") and a.args[0] == city}
    rng = random.Random(1)
    ends = [
        (ok, {a.args[1] for a in s if a.predicate == "truck-at-city" and a.args[0] == truck})
        for s, ok in (
            simulate(det, sim, state, GroundAction("drive-truck", (truck, city, target)), rng) for _ in range(1000)
        )
    ]
    assert all(where == {target} for ok, where in ends if ok)
    assert all(len(where) == 1 and where <= wrong for ok, where in ends if not ok)
    assert abs(sum(ok for ok, _ in ends) / len(ends) - 0.8) < 0.04
    zeno, _, _ = load("zenotravel")
    assert zeno.p_intended("complete-flying") == pytest.approx(1 / 25)  # the purpose, not "nothing happens"
    assert zeno.p_intended("complete-boarding") == pytest.approx(0.5)


def test_the_ff_replan_arm_plans_with_ffs_search_and_takes_the_tower_moves():
    """The baseline FF-Replan ran is FF's greedy h_FF search with helpful actions, alone and without step
    elimination: on blocksworld p01 its plan is valid and moves towers (1/10 reliable), what learned costs beat."""
    from benchmarks.experiments.ippc import FF_SEARCH
    from domains.validate import validate_plan
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.planner import Planner

    _, task, _ = load("blocksworld")
    with Planner([FastDownward(search=FF_SEARCH, workers=1, budget_s=10.0)], eliminate_steps=False) as ff:
        result = ff.plan(task)
    assert result.solved and validate_plan(task, result.actions()).ok
    assert {a.name for a in result.actions()} & {"pick-tower", "put-tower-on-block"}
    assert result.attempts[-1].details.get("search") == "custom"  # FF's search ran alone, not the race
