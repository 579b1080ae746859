"""Replans that keep the current plan: a state the plan predicted gets the rest of the plan back as
`plan-reuse`; a perturbed state, an excluded step or another cost model gets a real, validated replan."""

from __future__ import annotations

import pytest

from domains.bundled import bundled_task
from domains.ground_text import parse_ground_action
from domains.validate import applicable, apply, validate_plan
from portfolio.planner import REUSE_DELEGATE, Planner, reusable_suffix


@pytest.fixture(scope="module")
def blocks():
    return bundled_task("blocksworld", 5, seed=3)


@pytest.fixture(scope="module")
def first(classical_planner, blocks):
    result = classical_planner.plan(blocks)
    assert result.solved and len(result.plan) >= 3 and result.cost_model == "task"
    return result


def run(task, steps):
    state = task.problem.init
    for step in steps:
        state = apply(task, state, step)
    return state


def test_a_predicted_state_gets_the_rest_of_the_plan_back(classical_planner, blocks, first):
    actions = first.actions()
    state = run(blocks, actions[:2])
    result = classical_planner.plan(
        blocks, init=state, previous_plan=first.plan[2:], previous_cost_model=first.cost_model
    )
    assert result.delegate == REUSE_DELEGATE and result.solved
    assert result.plan == first.plan[2:]
    assert [a.delegate for a in result.attempts] == [REUSE_DELEGATE]
    assert validate_plan(blocks, result.actions(), init=state).ok
    assert result.cost == len(first.plan) - 2  # unit costs


def test_a_perturbed_state_gets_a_real_replan(classical_planner, blocks, first):
    actions = first.actions()
    state = run(blocks, actions[:1])
    # Another applicable action than the plan's next one, executed instead of it.
    other = next(a for a in _applicable(blocks, state) if a != actions[1])
    perturbed = apply(blocks, state, other)
    assert reusable_suffix(blocks, perturbed, actions[1:]) is None  # the premise: the rest no longer works
    result = classical_planner.plan(blocks, init=perturbed, previous_plan=first.plan[1:])
    assert result.solved and result.delegate != REUSE_DELEGATE
    assert validate_plan(blocks, result.actions(), init=perturbed).ok


def test_an_excluded_step_or_another_cost_model_forces_a_replan(classical_planner, blocks, first):
    state = run(blocks, first.actions()[:1])
    banned = first.plan[-1]
    result = classical_planner.plan(blocks, init=state, previous_plan=first.plan[1:], excluded=[banned])
    assert result.delegate != REUSE_DELEGATE and banned not in result.plan
    if result.solved:
        assert validate_plan(blocks, result.actions(), init=state).ok
    other = classical_planner.plan(blocks, init=state, previous_plan=first.plan[1:], previous_cost_model="learned:7")
    assert other.solved and other.delegate != REUSE_DELEGATE


def test_a_later_suffix_is_reused_when_a_step_happened_anyway(blocks, first):
    actions = first.actions()
    state = run(blocks, actions[:2])  # the world did step 2 as well
    assert reusable_suffix(blocks, state, actions[1:]) == (1, actions[2:])
    assert reusable_suffix(blocks, state, [parse_ground_action("(fly b1 b2)")]) is None  # unknown action
    assert reusable_suffix(blocks, state, []) is None


def test_the_agent_loop_offers_the_rest_of_the_plan_on_scheduled_replans_only():
    from loop_world import D, SpyPlanner, Start, chain

    from portfolio.agent import Agent
    from portfolio.delegates.registry import AGENT_DELEGATES, build_stages

    class Recording(SpyPlanner):
        def __init__(self, planner):
            super().__init__(planner)
            self.calls = []

        def plan(self, task, **kwargs):
            result = super().plan(task, **kwargs)
            self.calls.append((bool(kwargs.get("previous_plan")), result.delegate))
            return result

    with Planner(build_stages(AGENT_DELEGATES), warm=False) as real:
        spy = Recording(real)
        with Agent(chain(), planner=spy, trigger="every-step", backoff_s=0.0) as ag:
            result = ag.run(Start(), goal=D)
        assert result.succeeded
        assert spy.calls == [(False, spy.calls[0][1]), (True, REUSE_DELEGATE), (True, REUSE_DELEGATE)]

        failing = Recording(real)  # on-failure: the world said the plan was wrong, so no reuse is offered
        with Agent(chain(make_c=LookupError("no index")), planner=failing, backoff_s=0.0) as ag:
            ag.run(Start(), goal=D)
        assert len(failing.calls) >= 2 and all(offered is False for offered, _ in failing.calls)


def _applicable(task, state):
    from itertools import product

    objects = sorted(name for name, _ in task.problem.objects)
    for schema in task.domain.actions:
        for args in product(objects, repeat=len(schema.parameters)):
            action = parse_ground_action(f"({schema.name} {' '.join(args)})")
            if applicable(task, state, action):
                yield action


def test_the_cost_model_names_what_the_costs_depend_on(classical_planner):
    assert classical_planner.cost_model_for("cautious", None) == "task"  # no failure model: the task's own costs
    classical_planner._model = object()  # a loaded failure model, as far as the name is concerned
    try:
        mean = classical_planner.cost_model_for("cautious", {"site": "a"})
        assert mean.startswith("learned:") and mean == classical_planner.cost_model_for("cautious", {"site": "a"})
        assert mean != classical_planner.cost_model_for("cautious", {"site": "b"})  # another situation, other costs
        assert mean != classical_planner.cost_model_for("optimistic", {"site": "a"})
        assert classical_planner.cost_model_for("thompson", {"site": "a"}) is None  # fresh draws: never reused
    finally:
        classical_planner._model = None
