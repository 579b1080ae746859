"""Differential validation on a sample: the project's validator and unified-planning's plan validator agree on
the cascade's plans (and on broken versions of them). The full sweep is `benchmarks/experiments/up_differential.py`."""

from __future__ import annotations

import pytest
from support import IPC, IPC_MORE

from domains.load import load_task
from domains.up_bridge import up_validate
from domains.validate import validate_plan

SAMPLE = [
    IPC_MORE / "miconic-fulladl" / "f1-0.pddl",  # ADL
    IPC / "elevators-sat08-strips" / "p01.pddl",  # action costs
]


@pytest.mark.slow
def test_our_validator_and_unified_planning_agree_on_cascade_plans() -> None:
    from portfolio.delegates.registry import CLASSICAL_ONLY
    from portfolio.planner import Planner

    with Planner(CLASSICAL_ONLY, budget_s=10) as planner:
        for problem in SAMPLE:
            task = load_task(problem.parent / "domain.pddl", problem)
            result = planner.plan(task)
            assert result.solved, f"{problem}: {result}"
            plan = result.actions()
            ours, theirs = validate_plan(task, plan), up_validate(task, plan)
            assert ours.ok and theirs.valid is True, f"{problem}: {ours.message} | {theirs.message}"
            if task.problem.minimize_total_cost:
                assert theirs.cost == pytest.approx(ours.cost)
            broken = plan[:-1]
            assert not validate_plan(task, broken).ok and up_validate(task, broken).valid is False


def test_unified_planning_cannot_read_derived_predicates_and_says_so() -> None:
    from test_adl import AXIOMS

    from domains.pddl import parse_task

    verdict = up_validate(parse_task(*AXIOMS), [])
    assert verdict.valid is None and "cannot read" in verdict.message
