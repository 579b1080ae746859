"""The cascade's contract: order, fall-through on errors and invalid plans, the unsolvable stop, budgets."""

from __future__ import annotations

import time

import pytest
from support import IPC, load_ipc

from domains.bundled import bundled_task
from domains.model import GroundAction
from domains.validate import validate_plan
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.pyperplan import Pyperplan
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from portfolio.engine.tiers import Tier


class Recording(Delegate):
    """A delegate double that records when it was called and answers as scripted (tests of the cascade's
    own logic: what it does with each kind of answer)."""

    def __init__(self, name, outcome=None, raises=None, budget_s=None, sleep_s=0.0):
        self.name, self.outcome, self.raises, self.budget_s, self.sleep_s = name, outcome, raises, budget_s, sleep_s
        self.calls: list[float] = []

    def solve(self, request, deadline):
        self.calls.append(deadline)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.raises:
            raise self.raises
        return self.outcome

    def close(self):
        pass


@pytest.fixture(scope="module")
def blocks():
    return bundled_task("blocksworld", 4, seed=1)


def test_first_delegate_that_solves_wins_and_later_ones_are_not_tried(blocks):
    fd = FastDownward()
    later = Recording("later", DelegateOutcome(Status.ERROR, reason="should not run"))
    cascade = PortfolioDecomposition([Tier("classical", [fd, later], 5.0)])  # order is tested, not speed
    try:
        result = cascade.solve(PlanRequest(blocks))
    finally:
        cascade.close()
    assert result.status is Status.SOLVED and result.delegate == "fast-downward"
    assert [a.delegate for a in result.attempts] == ["fast-downward"]
    assert later.calls == []
    assert validate_plan(blocks, result.actions()).ok


def test_exception_and_error_fall_through_to_the_next_delegate_in_order(blocks):
    boom = Recording("boom", raises=RuntimeError("delegate crashed"))
    broken = FastDownward(search="this_is_not_a_search()", name="fd-broken")
    pyperplan = Pyperplan()
    cascade = PortfolioDecomposition([Tier("classical", [boom, broken, pyperplan], 5.0)])
    try:
        result = cascade.solve(PlanRequest(blocks))
    finally:
        cascade.close()
    assert [a.delegate for a in result.attempts] == ["boom", "fd-broken", "pyperplan"]
    assert [a.status for a in result.attempts] == [Status.ERROR, Status.ERROR, Status.SOLVED]
    assert "delegate crashed" in result.attempts[0].reason
    assert result.delegate == "pyperplan" and result.solved
    assert validate_plan(blocks, result.actions()).ok


def test_invalid_plan_counts_as_that_delegates_failure(blocks):
    liar = Recording("liar", DelegateOutcome(Status.SOLVED, plan=[GroundAction("stack", ("b1", "b2"))]))
    fd = FastDownward()
    cascade = PortfolioDecomposition([Tier("classical", [liar, fd], 2.0)])
    try:
        result = cascade.solve(PlanRequest(blocks))
    finally:
        cascade.close()
    assert result.attempts[0].status is Status.ERROR
    assert "validator" in result.attempts[0].reason
    assert result.delegate == "fast-downward"


def test_proven_unsolvable_stops_the_cascade():
    from domains.pddl import parse_task

    domain = IPC / "blocks" / "domain.pddl"
    problem = """(define (problem impossible) (:domain BLOCKS) (:objects a b)
      (:init (clear a) (clear b) (ontable a) (ontable b) (handempty))
      (:goal (and (on a b) (on b a))))"""
    task = parse_task(domain.read_text(), problem, str(domain), "impossible.pddl")
    after = Recording("after", DelegateOutcome(Status.ERROR))
    cascade = PortfolioDecomposition([Tier("classical", [FastDownward(), after], 2.0)])
    try:
        result = cascade.solve(PlanRequest(task))
    finally:
        cascade.close()
    assert result.status is Status.UNSOLVABLE
    assert after.calls == []
    assert result.attempts[-1].status is Status.UNSOLVABLE


def test_goal_that_already_holds_is_solved_by_the_empty_plan():
    task = load_ipc("blocks", "probBLOCKS-4-0.pddl")
    from dataclasses import replace

    from domains.pddl_writer import task_with_texts

    holds = task_with_texts(task.domain, replace(task.problem, goal=next(iter(sorted(task.problem.init)))))
    never = Recording("never", DelegateOutcome(Status.ERROR))
    result = PortfolioDecomposition([never]).solve(PlanRequest(holds))
    assert result.solved and result.plan == [] and never.calls == []


def test_tier_budget_is_shared_and_exhausted_tier_records_skipped_delegates(blocks):
    slow = Recording("slow", DelegateOutcome(Status.TIMEOUT, reason="slept"), sleep_s=0.3)
    skipped = Recording("skipped", DelegateOutcome(Status.ERROR))
    result = PortfolioDecomposition([Tier("t", [slow, skipped], 0.2)]).solve(PlanRequest(blocks))
    assert result.status is Status.TIMEOUT
    assert [a.delegate for a in result.attempts] == ["slow", "skipped"]
    assert result.attempts[1].reason.startswith("tier budget used up")
    assert skipped.calls == []


def test_each_delegate_deadline_is_capped_by_its_own_budget(blocks):
    capped = Recording("capped", DelegateOutcome(Status.ERROR), budget_s=0.1)
    before = time.monotonic()
    PortfolioDecomposition([Tier("t", [capped], 10.0)]).solve(PlanRequest(blocks))
    after = time.monotonic()
    assert before + 0.1 <= capped.calls[0] <= after + 0.1  # its own 0.1 s from when it was called, not the tier's 10


def test_every_attempt_has_status_time_and_reason(blocks):
    failing = Recording("failing", DelegateOutcome(Status.ERROR, reason="no luck"))
    cascade = PortfolioDecomposition([failing, Tier("classical", [FastDownward()], 1.0)])
    try:
        result = cascade.solve(PlanRequest(blocks))
    finally:
        cascade.close()
    first = result.attempts[0]
    assert (first.delegate, first.status, first.reason) == ("failing", Status.ERROR, "no luck")
    solved = result.attempts[-1]
    assert solved.status is Status.SOLVED and solved.elapsed_ms > 0  # a real search: its time measured
    assert result.elapsed_ms >= sum(a.elapsed_ms for a in result.attempts) * 0.9


def test_a_supports_check_that_raises_counts_as_declining(blocks):
    class Broken(Recording):
        def supports(self, task):
            raise RuntimeError("cannot tell")

    broken = Broken("broken", DelegateOutcome(Status.ERROR))
    with PortfolioDecomposition([Tier("t", [broken, FastDownward()], 5.0)]) as cascade:
        result = cascade.solve(PlanRequest(blocks))
    assert (result.attempts[0].status, broken.calls) == (Status.UNSUPPORTED, [])
    assert "cannot tell" in result.attempts[0].reason
    assert result.solved and validate_plan(blocks, result.actions()).ok
