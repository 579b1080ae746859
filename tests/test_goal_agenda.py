"""The non-LLM decomposer: goal-agenda ordering, incremental subgoals on one translation, the full-goal fallback,
its place in the cascade, and its budget. Every plan is checked by the validator."""

from __future__ import annotations

import time

import pytest
from support import IPC

from domains.load import load_task
from domains.validate import validate_plan
from portfolio.delegates.decompose import SubgoalSolver
from portfolio.delegates.goal_agenda import GoalAgenda
from portfolio.delegates.registry import build_stages, decomposer_tier
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import PlanRequest, Status


def ipc(domain: str, problem: str):
    return load_task(IPC / domain / "domain.pddl", IPC / domain / problem)


@pytest.fixture(scope="module")
def agenda():
    delegate = GoalAgenda(SubgoalSolver(classical=("fast-downward",)))
    delegate.warm_up()
    yield delegate
    delegate.close()


def test_tower_is_built_from_the_bottom(agenda):
    # Goal: c on b on a on e on f on d. Stacking a block first would have to be undone to put one below it.
    task = ipc("blocks", "probBLOCKS-6-0.pddl")
    request = PlanRequest(task)
    translation, why = agenda.solver.translation(request, time.monotonic() + 10)
    assert not why
    subgoals = agenda.subgoals(request, translation, time.monotonic() + 10)
    firsts = [str(g.parts[-1]) if hasattr(g, "parts") else str(g) for g in subgoals[:-1]]
    assert firsts == ["(on f d)", "(on e f)", "(on a e)", "(on b a)"]
    assert subgoals[-1] == task.problem.goal


def test_agenda_solves_incrementally_and_keeps_achieved_goals(agenda):
    task = ipc("blocks", "probBLOCKS-9-0.pddl")
    outcome = agenda.solve(PlanRequest(task), time.monotonic() + 20)
    assert outcome.status is Status.SOLVED and outcome.details["method"] == "agenda"
    assert validate_plan(task, outcome.plan).ok
    steps = outcome.details["agenda_steps"]
    assert len(steps) == len(outcome.details["agenda"]) and all(s["status"] == "solved" for s in steps)


def test_parking_missed_by_the_one_second_tier_is_solved(agenda):
    # The smallest parking problem takes Fast Downward several seconds (most of it translation): out of reach for
    # the 1 s classical tier, within the decomposer tier's 30 s.
    task = ipc("parking-sat11-strips", "pfile08-031.pddl")
    outcome = agenda.solve(PlanRequest(task), time.monotonic() + 30)
    assert outcome.status is Status.SOLVED, outcome.reason
    assert validate_plan(task, outcome.plan).ok


@pytest.mark.serial  # asserts the 2 s budget
def test_budget_holds_on_a_task_too_hard_for_it(agenda):
    task = ipc("parking-sat11-strips", "pfile10-040.pddl")
    started = time.monotonic()
    outcome = agenda.solve(PlanRequest(task), time.monotonic() + 2.0)
    elapsed = time.monotonic() - started
    assert outcome.status is Status.TIMEOUT and outcome.plan is None
    assert elapsed < 2.0 + 1.5  # the budget, with a tolerance for killing processes


def test_cascade_falls_to_the_decomposer_tier():
    task = ipc("blocks", "probBLOCKS-6-0.pddl")
    stages = build_stages(["fast-downward", "pyperplan", "goal-agenda"], budget_s=0.001, decomposer_budget_s=20)
    assert [getattr(s, "name", None) for s in stages] == ["classical", "decomposer"]
    cascade = PortfolioDecomposition(stages, carry_over=False)  # with it, Fast Downward's carried-over work wins
    try:
        result = cascade.solve(PlanRequest(task))
    finally:
        cascade.close()
    assert result.solved and result.delegate == "goal-agenda" and result.source == "decomposition"
    assert [a.delegate for a in result.attempts] == ["fast-downward", "pyperplan", "goal-agenda"]
    assert validate_plan(task, result.actions()).ok


def test_tier_budget_and_llm_share():
    tier = decomposer_tier(["goal-agenda"], classical_names=["fast-downward"])
    assert tier.name == "decomposer" and tier.budget_s == 30.0
    tier.close()
    both = decomposer_tier(
        ["llm", "goal-agenda"], llm_url="http://127.0.0.1:9/v1", llm_model="m", decomposer_budget_s=30
    )
    llm, fallback = both.delegates
    assert llm.source == "llm" and fallback.source == "decomposition"
    # The split is configuration (the catalog's shares, overridable), not a constant: the fallback keeps a third.
    assert both.shares == (2.0, 1.0) and llm.budget_s is None and fallback.budget_s is None
    both.close()
    custom = decomposer_tier(
        ["llm", "goal-agenda"], llm_url="http://127.0.0.1:9/v1", llm_model="m", shares={"llm": 1, "goal-agenda": 1}
    )
    assert custom.shares == (1.0, 1.0)
    custom.close()
    with pytest.raises(ValueError, match="unknown delegate"):
        decomposer_tier(["goal-agendas"])


def test_a_timeout_says_what_ran_out_not_an_empty_cause(agenda):
    """Out of time before any agenda entry failed, the reason was `budget used up: ` with nothing after it."""
    outcome = agenda.solve(PlanRequest(ipc("blocks", "probBLOCKS-6-0.pddl")), time.monotonic())
    assert outcome.status is Status.TIMEOUT
    assert outcome.reason.startswith("budget used up") and not outcome.reason.rstrip().endswith(":"), outcome.reason
