"""Outcomes and time: only a proof stops the cascade, FD's exit codes in one aggregation, a failing search never
cuts short a running one, and a slow first delegate cannot starve the next one of its share."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from support import IPC, hardest_parking

from domains.pddl import parse_task
from domains.validate import validate_plan
from portfolio.delegates.fast_downward import exitcodes as fd_exitcodes
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.pyperplan import Pyperplan
from portfolio.delegates.registry import build_stages
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status, no_plan_status
from portfolio.engine.tiers import Tier, share_deadline

# The only plan starts with `w`, which the relaxed plan from the initial state does not use (`z`, `y` reach the
# goal when deletes are ignored): pyperplan's helpful-action pruning never tries it.
FOUR_DOMAIN = """(define (domain four) (:requirements :strips) (:predicates (s) (q) (r) (g))
  (:action z :parameters () :precondition (s) :effect (and (q) (not (s))))
  (:action y :parameters () :precondition (and (q) (s)) :effect (g))
  (:action w :parameters () :precondition (s) :effect (r))
  (:action x :parameters () :precondition (r) :effect (g)))"""
FOUR_PROBLEM = "(define (problem four-1) (:domain four) (:init (s)) (:goal (g)))"


@pytest.fixture(scope="module")
def four():
    return parse_task(FOUR_DOMAIN, FOUR_PROBLEM, "four-domain.pddl", "four-problem.pddl")


def test_pyperplan_exhausting_its_pruned_search_is_incomplete_not_unsolvable(four):
    with Pyperplan() as pyperplan:
        outcome = pyperplan.solve(PlanRequest(four), time.monotonic() + 10)
    assert outcome.status is Status.INCOMPLETE and outcome.plan is None


def test_an_incomplete_answer_does_not_stop_the_cascade(four):
    stages = build_stages(["pyperplan", "goal-agenda"], budget_s=5.0, decomposer_budget_s=20)
    with PortfolioDecomposition(stages) as cascade:
        result = cascade.solve(PlanRequest(four))
    assert [(a.delegate, a.status) for a in result.attempts] == [
        ("pyperplan", Status.INCOMPLETE),
        ("goal-agenda", Status.SOLVED),
    ]
    assert result.solved and result.plan == ["(w)", "(x)"]
    assert validate_plan(four, result.actions()).ok


def test_cli_solves_the_four_action_task_after_pyperplan_gives_up(tmp_path):
    (tmp_path / "d.pddl").write_text(FOUR_DOMAIN)
    (tmp_path / "p.pddl").write_text(FOUR_PROBLEM)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "portfolio.cli",
            "plan",
            tmp_path / "d.pddl",
            tmp_path / "p.pddl",
            "--delegates",
            "pyperplan,goal-agenda",
            "--budget",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "solved" and result["attempts"][0]["status"] == "incomplete"


def test_unsupported_delegates_are_skipped_and_hold_no_share():
    adl = """(define (domain adl) (:requirements :adl) (:predicates (a) (b))
      (:action go :parameters () :precondition (not (a)) :effect (and (a) (when (a) (b)))))"""
    task = parse_task(adl, "(define (problem p) (:domain adl) (:init) (:goal (a)))", "adl.pddl", "p.pddl")
    with PortfolioDecomposition([Tier("t", [Pyperplan(), FastDownward()], 5.0, shares=(100.0, 1.0))]) as cascade:
        result = cascade.solve(PlanRequest(task))
    first, second = result.attempts
    assert first.status is Status.UNSUPPORTED and "STRIPS" in first.reason and first.elapsed_ms == 0.0
    assert second.status is Status.SOLVED and validate_plan(task, result.actions()).ok
    recording = Recording()
    PortfolioDecomposition([Tier("t", [Pyperplan(), recording], 5.0, shares=(100.0, 1.0))]).solve(PlanRequest(task))
    assert recording.slices[0] == pytest.approx(5.0, abs=0.1)  # the declined delegate's share is not reserved


# -- Fast Downward's exit codes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "codes, status, search",
    [
        ({"lama-first": 0, "lama-costs": 34}, Status.SOLVED, "lama-first"),
        ({"lama-first": 0, "lama-costs": 0}, Status.SOLVED, "lama-costs"),  # the last search's plan is preferred
        ({"lama-first": 12, "lama-costs": 11}, Status.UNSOLVABLE, "lama-costs"),
        ({"lama-first": 12, "lama-costs": None}, Status.TIMEOUT, "lama-costs"),
        ({"lama-first": 32, "lama-costs": 22}, Status.MEMOUT, "lama-costs"),
        ({"lama-first": 12, "lama-costs": 34}, Status.INCOMPLETE, "lama-first"),
        ({"lama-first": 34, "lama-costs": 34}, Status.UNSUPPORTED, "lama-first"),
        ({"lama-first": 34, "lama-costs": 32}, Status.ERROR, "lama-first"),
        ({"lama-first": -11}, Status.ERROR, "lama-first"),
    ],
)
def test_one_aggregation_over_the_searches_that_ran(codes, status, search):
    verdict = fd_exitcodes.aggregate(codes)
    assert (verdict.status, verdict.search) == (status, search)


def test_no_plan_status_prefers_what_more_time_would_change():
    assert no_plan_status([Status.INCOMPLETE, Status.TIMEOUT, Status.ERROR]) is Status.TIMEOUT
    assert no_plan_status([Status.UNSUPPORTED, Status.INCOMPLETE]) is Status.INCOMPLETE
    assert no_plan_status([Status.UNSUPPORTED, Status.UNSUPPORTED]) is Status.UNSUPPORTED
    assert no_plan_status([Status.UNSUPPORTED, Status.ERROR]) is Status.ERROR


def briefcase(objects: int, places: int) -> tuple[str, str]:
    """A briefcase world with action costs: moving carries whatever is inside (a conditional effect, which
    LM-cut does not support)."""
    domain = """(define (domain briefcase) (:requirements :typing :conditional-effects :action-costs)
      (:types place thing)
      (:predicates (at-b ?p - place) (at ?t - thing ?p - place) (in ?t - thing))
      (:functions (total-cost) - number (road ?a ?b - place) - number)
      (:action move :parameters (?a ?b - place) :precondition (at-b ?a)
        :effect (and (at-b ?b) (not (at-b ?a)) (increase (total-cost) (road ?a ?b))
                     (forall (?t - thing) (when (in ?t) (and (at ?t ?b) (not (at ?t ?a)))))))
      (:action put-in :parameters (?t - thing ?p - place) :precondition (and (at ?t ?p) (at-b ?p))
        :effect (and (in ?t) (increase (total-cost) 1)))
      (:action take-out :parameters (?t - thing ?p - place) :precondition (and (in ?t) (at-b ?p))
        :effect (and (not (in ?t)) (increase (total-cost) 1))))"""
    things = [f"t{i}" for i in range(objects)]
    spots = [f"p{i}" for i in range(places)]
    roads = " ".join(
        f"(= (road {a} {b}) {1 + (i * 7 + j * 3) % 5})" for i, a in enumerate(spots) for j, b in enumerate(spots)
    )
    problem = (
        f"(define (problem bc) (:domain briefcase) (:objects {' '.join(things)} - thing "
        f"{' '.join(spots)} - place) (:init (at-b p0) {roads} "
        + " ".join(f"(at {t} {spots[i % places]})" for i, t in enumerate(things))
        + f") (:goal (and {' '.join(f'(at {t} {spots[(i * 3 + 1) % places]})' for i, t in enumerate(things))}"
        ")) (:metric minimize (total-cost)))"
    )
    return domain, problem


def test_a_cost_aware_search_that_fails_does_not_kill_a_running_one():
    """LM-cut rejects conditional effects at once (exit code 34) while lama-first is still searching: the
    delegate keeps waiting for lama-first instead of reporting an expired budget."""
    task = parse_task(*briefcase(objects=40, places=12), "briefcase.pddl", "bc.pddl")
    with FastDownward(cost_alias="seq-opt-lmcut", quality="first") as fd:
        fd.translate(PlanRequest(task), time.monotonic() + 30)  # translated, so the searches start together
        outcome = fd.solve(PlanRequest(task), time.monotonic() + 30)
        # the anytime pair: A* with LM-cut beside the anytime search on a small task, rejected the same way
        anytime = fd.solve(PlanRequest(task, quality="anytime"), time.monotonic() + 30)
    assert outcome.details["searches"]["seq-opt-lmcut"] == "configuration not supported for this task"
    assert outcome.status is Status.SOLVED, outcome.reason
    assert outcome.details["search"] == "lama-first"
    assert validate_plan(task, outcome.plan).ok
    assert anytime.details["searches"]["seq-opt-lmcut"] == "configuration not supported for this task"
    assert anytime.status is Status.SOLVED and anytime.details["search"] == "anytime-wastar"
    assert validate_plan(task, anytime.plan).ok


# -- time shares -------------------------------------------------------------------------------------------


class Recording(Delegate):
    """Records the deadline the cascade gives it (tests of the cascade's own time split)."""

    name, budget_s, source = "second", None, "classical"

    def __init__(self):
        self.slices: list[float] = []

    def solve(self, request, deadline):
        self.slices.append(deadline - time.monotonic())
        return DelegateOutcome(Status.ERROR, reason="recorded")

    def close(self):
        pass


def test_share_deadline_splits_what_is_left_by_the_shares_still_to_run():
    assert share_deadline(0.0, 1.0, 4.0, 5.0) == pytest.approx(0.8)
    assert share_deadline(0.9, 1.0, 1.0, 1.0) == pytest.approx(1.0)  # the last one gets all that is left
    assert share_deadline(2.0, 1.0, 1.0, 2.0) == 2.0  # nothing left


@pytest.mark.serial
def test_a_slow_first_delegate_leaves_the_second_its_share():
    """Fast Downward cannot translate parking in 1 s; before shares it used the whole tier and pyperplan got
    0.0 ms. With shares 3:1 the second delegate still gets a quarter of the tier."""
    problem = hardest_parking()
    domain = IPC / "parking-sat11-strips" / "domain.pddl"
    task = parse_task(domain.read_text(), problem.read_text(), str(domain), str(problem))
    second = Recording()
    with PortfolioDecomposition([Tier("classical", [FastDownward(), second], 1.0, shares=(3, 1))]) as cascade:
        result = cascade.solve(PlanRequest(task))
    assert result.attempts[0].status is Status.TIMEOUT
    assert result.attempts[0].elapsed_ms < 950  # stopped at the end of its three quarters (0.75 s), not 1 s
    assert second.slices and second.slices[0] >= 0.2  # a quarter of 1 s, less the time to stop the first


def test_equal_shares_by_default_and_unused_time_goes_to_the_next():
    fast, second = Recording(), Recording()
    fast.name = "fast"
    blocks = parse_task(
        (IPC / "blocks" / "domain.pddl").read_text(), (IPC / "blocks" / "probBLOCKS-4-0.pddl").read_text(), "d", "p"
    )
    PortfolioDecomposition([Tier("t", [fast, second], 2.0)]).solve(PlanRequest(blocks))
    assert fast.slices[0] == pytest.approx(1.0, abs=0.05)
    assert second.slices[0] == pytest.approx(2.0, abs=0.05)  # the first returned at once: all of it is left


@pytest.mark.serial
def test_handing_the_task_to_a_search_that_does_not_read_stops_at_the_deadline():
    from portfolio.delegates.fast_downward.search_run import _feed

    stuck = subprocess.Popen(["sleep", "30"], stdin=subprocess.PIPE)  # never reads: the pipe fills up
    try:
        started = time.monotonic()
        assert _feed(stuck, b"x" * (8 << 20), started + 0.3) is False
        assert time.monotonic() - started < 0.6
    finally:
        stuck.kill()
        stuck.wait()
