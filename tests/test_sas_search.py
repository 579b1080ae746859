"""In-process GBFS+hFF over a cached SAS translation (`portfolio.delegates.fast_downward.sas_search`): replans from a
perturbed state on
small tasks run no search process, larger tasks still do, the deadline holds, and a search that finds nothing
says `incomplete` while the process search goes on."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from support import IPC

from domains.ground_text import parse_ground_action
from domains.load import load_task
from domains.validate import applicable, apply, validate_plan
from portfolio.delegates.fast_downward.delegate import INPROCESS_MAX_OPERATORS
from portfolio.delegates.fast_downward.inprocess import INPROCESS_NAME
from portfolio.delegates.fast_downward.sas_search import compile_task, greedy_search
from portfolio.engine.results import PlanRequest, Status
from portfolio.planner import REUSE_DELEGATE, Planner, reusable_suffix


def ipc_task(domain: str, problem: str):
    return load_task(IPC / domain / "domain.pddl", IPC / domain / problem)


@pytest.fixture(scope="module")
def planner():
    with Planner(["fast-downward"], budget_s=10.0) as shared:  # which search ran is tested, not speed
        yield shared


def perturbed_state(planner, task):
    """Halfway through a first plan, another applicable action than the plan's next one, so no suffix of the
    plan stays valid: the state and the rest of the plan."""
    plan = planner.plan(task).actions()
    state = task.problem.init
    for step in plan[: len(plan) // 2]:
        state = apply(task, state, step)
    rest = plan[len(plan) // 2 :]
    grounded = planner.fast_downward.grounded_actions(PlanRequest(task=task), time.monotonic() + 30)
    for text in grounded:
        action = parse_ground_action(text)
        if action != rest[0] and applicable(task, state, action):
            after = apply(task, state, action)
            if reusable_suffix(task, after, rest) is None:
                return after, [str(a) for a in rest]
    raise AssertionError("no perturbing action")


@pytest.mark.parametrize("domain,problem", [("blocks", "probBLOCKS-5-0.pddl"), ("gripper", "prob01.pddl")])
def test_a_perturbed_replan_on_a_small_task_runs_in_process(planner, domain, problem):
    task = ipc_task(domain, problem)
    state, rest = perturbed_state(planner, task)
    result = planner.plan(task, init=state, previous_plan=rest)
    assert result.solved and result.delegate == INPROCESS_NAME  # not Fast Downward's search: this project's
    details = result.attempts[-1].details
    assert result.attempts[-1].delegate == INPROCESS_NAME
    assert details["translation_reused"] and details["search"] == "in-process"
    assert details["in_process"]["status"] == "solved" and "searches" not in details  # no process ran
    assert validate_plan(task, result.actions(), init=state).ok


def test_a_task_beyond_the_threshold_uses_the_process(planner):
    task = ipc_task("depot", "p02.pddl")
    translation, _ = planner.fast_downward.translate(PlanRequest(task=task), time.monotonic() + 30)
    assert len(translation.sas.operators) > INPROCESS_MAX_OPERATORS
    state, rest = perturbed_state(planner, task)
    result = planner.plan(task, init=state, previous_plan=rest)
    assert result.solved and result.delegate != REUSE_DELEGATE
    details = result.attempts[-1].details
    assert details["translation_reused"] and details["search"] != "in-process" and "in_process" not in details
    assert validate_plan(task, result.actions(), init=state).ok


def test_when_the_in_process_search_gives_up_the_process_search_goes_on(planner):
    task = ipc_task("blocks", "probBLOCKS-4-0.pddl")
    state, rest = perturbed_state(planner, task)
    fast_downward = planner.fast_downward
    settings = fast_downward.settings
    fast_downward.settings = replace(settings, inprocess_node_cap=1)
    try:
        result = planner.plan(task, init=state, previous_plan=rest)
    finally:
        fast_downward.settings = settings
    details = result.attempts[-1].details
    assert details["in_process"]["status"] == "memout"
    assert result.solved and details["search"] != "in-process" and details["searches"]
    assert validate_plan(task, result.actions(), init=state).ok


def small_sas(planner, domain: str, problem: str):
    task = ipc_task(domain, problem)
    translation, _ = planner.fast_downward.translate(PlanRequest(task=task), time.monotonic() + 30)
    return task, translation.sas


def test_a_goal_greedy_search_cannot_reach_is_incomplete_not_unsolvable(planner):
    task, sas = small_sas(planner, "blocks", "probBLOCKS-4-0.pddl")
    # Blocks can be picked up and put down, never stacked: the goal is out of reach.
    no_stacking = frozenset(f"({op.name})" for op in sas.operators if op.name.startswith("stack"))
    result = greedy_search(compile_task(sas, no_stacking), sas.init, time.monotonic() + 10)
    assert result.status is Status.INCOMPLETE and result.plan is None
    # Without exclusions the same task is solved, and the plan is valid.
    solved = greedy_search(compile_task(sas), sas.init, time.monotonic() + 10)
    assert solved.status is Status.SOLVED
    assert validate_plan(task, [parse_ground_action(f"({n})") for n in solved.plan]).ok


@pytest.mark.serial  # asserts the search stops within 50 ms of its deadline
def test_the_deadline_holds(planner):
    _, sas = small_sas(planner, "depot", "p02.pddl")
    problem = compile_task(sas)
    assert greedy_search(problem, sas.init, time.monotonic() - 1).status is Status.TIMEOUT
    started = time.monotonic()
    result = greedy_search(problem, sas.init, started + 0.002, node_cap=10**7, check_every=1)
    assert result.status is Status.TIMEOUT and time.monotonic() - started < 0.05
