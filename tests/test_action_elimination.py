"""Greedy action elimination: steps no goal needs leave the plan, the rest stays valid, and the cascade applies it."""

from __future__ import annotations

import random
import time

import pytest
from support import load_ipc

from domains.action_elimination import eliminate
from domains.bundled import bundled_task
from domains.model import GroundAction
from domains.validate import applicable, apply, validate_plan
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from portfolio.engine.tiers import Tier


def _step(text: str) -> GroundAction:
    name, *args = text.strip("()").split()
    return GroundAction(name, tuple(args))


BLOCKS_PLAN = [
    _step(s)
    for s in (
        "(unstack b2 b4)",
        "(put-down b2)",
        "(unstack b4 b1)",
        "(put-down b4)",
        "(unstack b1 b3)",
        "(stack b1 b2)",
        "(pick-up b4)",
        "(stack b4 b1)",
        "(pick-up b3)",
        "(stack b3 b4)",
    )
]


@pytest.fixture(scope="module")
def blocks():
    return bundled_task("blocksworld", 4, seed=1)


def _with_detours(task, plan, rng: random.Random, detours: int) -> list[GroundAction]:
    """`plan` with `detours` pick-up/put-down (or unstack/stack back) pairs inserted where they apply: steps
    that change nothing, so a valid plan stays valid."""
    padded, inserted = list(plan), 0
    while inserted < detours:  # a position where the hand is full takes no detour: try another
        at = rng.randrange(len(padded) + 1)
        state = task.problem.init
        for step in padded[:at]:
            state = apply(task, state, step)
        blocks = sorted({a.args[0] for a in state if a.predicate == "clear"})
        rng.shuffle(blocks)
        for block in blocks:
            below = next((a.args[1] for a in state if a.predicate == "on" and a.args[0] == block), None)
            pair = (
                [GroundAction("pick-up", (block,)), GroundAction("put-down", (block,))]
                if below is None
                else [GroundAction("unstack", (block, below)), GroundAction("stack", (block, below))]
            )
            if applicable(task, state, pair[0]):
                padded[at:at] = pair
                inserted += 1
                break
    return padded


def test_detours_are_removed_and_what_is_left_is_valid(blocks):
    assert validate_plan(blocks, BLOCKS_PLAN).ok
    for seed in range(20):
        padded = _with_detours(blocks, BLOCKS_PLAN, random.Random(seed), detours=3)
        assert validate_plan(blocks, padded).ok and len(padded) == len(BLOCKS_PLAN) + 6
        reduced = eliminate(blocks, padded)
        assert validate_plan(blocks, reduced).ok
        assert reduced == BLOCKS_PLAN, seed


def test_a_step_whose_removal_breaks_later_steps_goes_with_them(blocks):
    """Removing `pick-up b2` makes its `put-down b2` inapplicable: the pair goes in one trial."""
    plan = [
        _step("(unstack b2 b4)"),
        _step("(put-down b2)"),
        _step("(pick-up b2)"),
        _step("(put-down b2)"),
        *BLOCKS_PLAN[2:],
    ]
    assert validate_plan(blocks, plan).ok
    assert eliminate(blocks, plan) == BLOCKS_PLAN


def test_a_plan_with_nothing_to_remove_is_returned_as_it_is(blocks):
    assert eliminate(blocks, BLOCKS_PLAN) == BLOCKS_PLAN
    assert eliminate(blocks, []) == []


def test_a_deadline_already_passed_leaves_the_plan_unchanged(blocks):
    padded = _with_detours(blocks, BLOCKS_PLAN, random.Random(0), detours=2)
    assert eliminate(blocks, padded, deadline=time.monotonic() - 1) == padded


def test_removal_never_raises_a_cost_on_a_task_with_action_costs():
    task = load_ipc("elevators-sat08-strips", "p01.pddl")
    from portfolio.delegates.registry import CLASSICAL_ONLY, build_stages
    from portfolio.planner import Planner

    with Planner(build_stages(CLASSICAL_ONLY, budget_s=10.0), eliminate_steps=False) as planner:
        result = planner.plan(task)
    assert result.solved
    plan = result.actions()
    reduced = eliminate(task, plan)
    before, after = validate_plan(task, plan), validate_plan(task, reduced)
    assert before.ok and after.ok and after.cost <= before.cost


class Scripted(Delegate):
    """A delegate double whose answer is a fixed plan: the cascade's post-processing is what is tested."""

    name = "scripted"
    budget_s = None

    def __init__(self, plan):
        self.plan = plan

    def solve(self, request, deadline):
        return DelegateOutcome(Status.SOLVED, plan=list(self.plan))

    def close(self):
        pass


@pytest.mark.parametrize("eliminate_steps", [True, False])
def test_the_cascade_returns_the_reduced_plan_and_says_how_many_steps_went(blocks, eliminate_steps):
    padded = _with_detours(blocks, BLOCKS_PLAN, random.Random(3), detours=2)
    cascade = PortfolioDecomposition([Tier("classical", [Scripted(padded)], 5.0)], eliminate_steps=eliminate_steps)
    with cascade:
        result = cascade.solve(PlanRequest(blocks))
    assert result.solved and validate_plan(blocks, result.actions()).ok
    if eliminate_steps:
        assert result.actions() == BLOCKS_PLAN and result.eliminated_steps == 4
        assert result.cost == len(BLOCKS_PLAN)
    else:
        assert result.actions() == padded and result.eliminated_steps == 0
