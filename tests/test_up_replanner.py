"""`Replanner(problem, name="portfolio-replanner")` through UP's factory: each change (initial values, goals,
actions) changes the next plan as it should, every plan UP's validator accepts on the problem as changed; the
caller's problem is never touched; one planner stays warm across resolves; a kind outside the engine's, from the
start or after a change, is a status."""

from __future__ import annotations

import pytest
from support import descendants, example, poll
from unified_planning.engines import PlanGenerationResultStatus as UpStatus
from unified_planning.engines import ValidationResultStatus
from unified_planning.exceptions import UPUsageError
from unified_planning.shortcuts import DurativeAction, PlanValidator, Replanner

import portfolio.up  # noqa: F401  (registers the engines)
from portfolio.up.replanner import PortfolioReplanner

SOLVED = (UpStatus.SOLVED_SATISFICING, UpStatus.SOLVED_OPTIMALLY)


pytestmark = pytest.mark.usefixtures("quiet_up_credits")


# examples/up_replanner.py's corridor: a one-way corridor hall -> office -> lab -> store, a parcel lying in the
# office; the robot starts in the hall and must reach the store.
up_replanner = example("up_replanner")
corridor, teleport, AT, HOLDING = up_replanner.corridor, up_replanner.teleport, up_replanner.AT, up_replanner.HOLDING
WALKS = ["walk(hall, office)", "walk(office, lab)", "walk(lab, store)"]  # from the hall to the store


def steps(result) -> list[str]:
    return [str(a) for a in result.plan.actions]


def solved_and_valid(replanner, result) -> list[str]:
    """The plan's steps, once UP's validator has accepted it on the replanner's problem as it now stands."""
    assert result.status in SOLVED, (result.status, result.log_messages)
    with PlanValidator(name="sequential_plan_validator") as validator:
        assert validator.validate(replanner.problem, result.plan).status is ValidationResultStatus.VALID
    return steps(result)


def test_each_change_changes_the_plan_on_one_warm_planner() -> None:
    problem, (hall, office, lab, store) = corridor()
    with Replanner(problem, name="portfolio-replanner") as replanner:
        assert isinstance(replanner, PortfolioReplanner) and replanner.is_replanner()
        first = solved_and_valid(replanner, replanner.resolve(timeout=20))
        assert first == WALKS
        planner = replanner._engine._planner
        assert planner is not None

        replanner.update_initial_value(AT(hall), False)
        replanner.update_initial_value(AT(lab), True)
        assert solved_and_valid(replanner, replanner.resolve()) == ["walk(lab, store)"]

        replanner.add_goal(HOLDING)  # the parcel lies behind: the corridor is one-way, so no plan
        assert replanner.resolve().status is UpStatus.UNSOLVABLE_PROVEN
        replanner.update_initial_value(AT(lab), False)
        replanner.update_initial_value(AT(hall), True)
        with_parcel = solved_and_valid(replanner, replanner.resolve())
        assert "pick(office)" in with_parcel

        replanner.remove_goal(HOLDING)
        assert solved_and_valid(replanner, replanner.resolve()) == first

        replanner.add_action(teleport())
        assert solved_and_valid(replanner, replanner.resolve()) == ["teleport(hall, store)"]

        replanner.remove_action("walk")
        replanner.add_goal(HOLDING)
        assert sorted(solved_and_valid(replanner, replanner.resolve())) == [
            "pick(office)",
            "teleport(hall, office)",
            "teleport(office, store)",
        ]
        replanner.remove_action("teleport")  # only pick is left
        assert replanner.resolve().status is UpStatus.UNSOLVABLE_PROVEN
        assert replanner._engine._planner is planner  # the same warm planner throughout

    # the caller's problem is as it was
    assert [a.name for a in problem.actions] == ["walk", "pick"]
    assert problem.goals == [AT(store)]
    assert problem.initial_value(AT(hall)).bool_constant_value()


def test_removing_what_is_not_there_warns_or_raises_as_ups_checks_say() -> None:
    problem, _ = corridor()
    with Replanner(problem, name="portfolio-replanner") as replanner:
        with pytest.warns(UserWarning, match="fly not found"):
            replanner.remove_action("fly")
        with pytest.warns(UserWarning, match="not found among the problem's goals"):
            replanner.remove_goal(HOLDING)
        replanner.error_on_failed_checks = True
        with pytest.raises(UPUsageError, match="fly not found"):
            replanner.remove_action("fly")
        assert [a.name for a in replanner.problem.actions] == ["walk", "pick"]


def test_a_kind_outside_the_engines_is_a_status_not_an_exception() -> None:
    from unified_planning.test.examples import get_example_problems

    numeric = get_example_problems()["robot"].problem
    with pytest.warns(UserWarning, match="cannot establish"):
        replanner = Replanner(numeric, name="portfolio-replanner")
    with replanner:
        assert not replanner.supports(numeric.kind)
        result = replanner.resolve()
        assert result.status is UpStatus.UNSUPPORTED_PROBLEM and result.plan is None
        assert "does not support" in result.log_messages[0].message

    problem, _ = corridor()
    with Replanner(problem, name="portfolio-replanner") as replanner:
        assert replanner.supports(problem.kind)
        replanner.add_action(DurativeAction("wait"))  # a durative action: outside the kind from here on
        result = replanner.resolve()
        assert result.status is UpStatus.UNSUPPORTED_PROBLEM
        assert "CONTINUOUS_TIME" in result.log_messages[0].message
        replanner.remove_action("wait")  # back inside: plans again
        assert solved_and_valid(replanner, replanner.resolve()) == WALKS


def test_bad_params_are_refused_when_the_replanner_is_made() -> None:
    with pytest.raises(ValueError, match="objective"):
        Replanner(corridor()[0], name="portfolio-replanner", params={"objective": "speed"})


def test_the_end_of_the_with_block_stops_its_workers() -> None:
    """What `replanner[portfolio]` (UP's meta-engine over the oneshot engine) leaves running, this one stops."""
    problem, _ = corridor()
    before = set(descendants())
    with Replanner(problem, name="portfolio-replanner") as replanner:
        assert replanner.resolve().status in SOLVED
        assert set(descendants()) - before  # the planner's warm workers
    assert poll(lambda: set(descendants()) - before, lambda left: not left, 5, every=0.1) == set()
