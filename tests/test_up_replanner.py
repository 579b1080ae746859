"""`Replanner(problem, name="portfolio-replanner")` through UP's factory: each change (initial values, goals,
actions) changes the next plan as it should, every plan UP's validator accepts on the problem as changed; the
caller's problem is never touched; one planner stays warm across resolves; a kind outside the engine's, from the
start or after a change, is a status."""

from __future__ import annotations

import pytest
from support import descendants, poll
from unified_planning.engines import PlanGenerationResultStatus as UpStatus
from unified_planning.engines import ValidationResultStatus
from unified_planning.exceptions import UPUsageError
from unified_planning.shortcuts import (
    BoolType,
    DurativeAction,
    Fluent,
    InstantaneousAction,
    Object,
    PlanValidator,
    Problem,
    Replanner,
    UserType,
)

import portfolio.up  # noqa: F401  (registers the engines)
from portfolio.up.replanner import PortfolioReplanner

SOLVED = (UpStatus.SOLVED_SATISFICING, UpStatus.SOLVED_OPTIMALLY)


pytestmark = pytest.mark.usefixtures("quiet_up_credits")


class Road:
    """Four places on a one-way road l0 -> l1 -> l2 -> l3, a key lying at l1; the robot starts at l0 and must
    reach l3."""

    def __init__(self) -> None:
        self.place = UserType("Place")
        self.at = Fluent("at", BoolType(), p=self.place)
        self.road = Fluent("road", BoolType(), a=self.place, b=self.place)
        self.key_at = Fluent("key_at", BoolType(), p=self.place)
        self.has_key = Fluent("has_key", BoolType())
        walk = InstantaneousAction("walk", a=self.place, b=self.place)
        a, b = walk.parameters
        walk.add_precondition(self.at(a))
        walk.add_precondition(self.road(a, b))
        walk.add_effect(self.at(a), False)
        walk.add_effect(self.at(b), True)
        pick = InstantaneousAction("pick", p=self.place)
        (p,) = pick.parameters
        pick.add_precondition(self.at(p))
        pick.add_precondition(self.key_at(p))
        pick.add_effect(self.key_at(p), False)
        pick.add_effect(self.has_key, True)
        self.problem = Problem("road")
        for fluent in (self.at, self.road, self.key_at, self.has_key):
            self.problem.add_fluent(fluent, default_initial_value=False)
        self.problem.add_actions([walk, pick])
        self.l = [Object(f"l{i}", self.place) for i in range(4)]
        self.problem.add_objects(self.l)
        for here, there in zip(self.l, self.l[1:]):
            self.problem.set_initial_value(self.road(here, there), True)
        self.problem.set_initial_value(self.at(self.l[0]), True)
        self.problem.set_initial_value(self.key_at(self.l[1]), True)
        self.problem.add_goal(self.at(self.l[3]))

    def teleport(self) -> InstantaneousAction:
        teleport = InstantaneousAction("teleport", a=self.place, b=self.place)
        a, b = teleport.parameters
        teleport.add_precondition(self.at(a))
        teleport.add_effect(self.at(a), False)
        teleport.add_effect(self.at(b), True)
        return teleport


def steps(result) -> list[str]:
    return [str(a) for a in result.plan.actions]


def solved_and_valid(replanner, result) -> list[str]:
    """The plan's steps, once UP's validator has accepted it on the replanner's problem as it now stands."""
    assert result.status in SOLVED, (result.status, result.log_messages)
    with PlanValidator(name="sequential_plan_validator") as validator:
        assert validator.validate(replanner.problem, result.plan).status is ValidationResultStatus.VALID
    return steps(result)


def test_each_change_changes_the_plan_on_one_warm_planner() -> None:
    world = Road()
    l0, l1, l2, l3 = world.l
    with Replanner(world.problem, name="portfolio-replanner") as replanner:
        assert isinstance(replanner, PortfolioReplanner) and replanner.is_replanner()
        first = solved_and_valid(replanner, replanner.resolve(timeout=20))
        assert first == ["walk(l0, l1)", "walk(l1, l2)", "walk(l2, l3)"]
        planner = replanner._engine._planner
        assert planner is not None

        replanner.update_initial_value(world.at(l0), False)
        replanner.update_initial_value(world.at(l2), True)
        assert solved_and_valid(replanner, replanner.resolve()) == ["walk(l2, l3)"]

        replanner.add_goal(world.has_key)  # the key lies behind: the road is one-way, so no plan
        assert replanner.resolve().status is UpStatus.UNSOLVABLE_PROVEN
        replanner.update_initial_value(world.at(l2), False)
        replanner.update_initial_value(world.at(l0), True)
        with_key = solved_and_valid(replanner, replanner.resolve())
        assert "pick(l1)" in with_key

        replanner.remove_goal(world.has_key)
        assert solved_and_valid(replanner, replanner.resolve()) == first

        replanner.add_action(world.teleport())
        assert solved_and_valid(replanner, replanner.resolve()) == ["teleport(l0, l3)"]

        replanner.remove_action("walk")
        replanner.add_goal(world.has_key)
        assert sorted(solved_and_valid(replanner, replanner.resolve())) == [
            "pick(l1)",
            "teleport(l0, l1)",
            "teleport(l1, l3)",
        ]
        replanner.remove_action("teleport")  # only pick is left
        assert replanner.resolve().status is UpStatus.UNSOLVABLE_PROVEN
        assert replanner._engine._planner is planner  # the same warm planner throughout

    # the caller's problem is as it was
    assert [a.name for a in world.problem.actions] == ["walk", "pick"]
    assert world.problem.goals == [world.at(l3)]
    assert world.problem.initial_value(world.at(l0)).bool_constant_value()


def test_removing_what_is_not_there_warns_or_raises_as_ups_checks_say() -> None:
    world = Road()
    with Replanner(world.problem, name="portfolio-replanner") as replanner:
        with pytest.warns(UserWarning, match="fly not found"):
            replanner.remove_action("fly")
        with pytest.warns(UserWarning, match="not found among the problem's goals"):
            replanner.remove_goal(world.has_key)
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

    world = Road()
    with Replanner(world.problem, name="portfolio-replanner") as replanner:
        assert replanner.supports(world.problem.kind)
        replanner.add_action(DurativeAction("wait"))  # a durative action: outside the kind from here on
        result = replanner.resolve()
        assert result.status is UpStatus.UNSUPPORTED_PROBLEM
        assert "CONTINUOUS_TIME" in result.log_messages[0].message
        replanner.remove_action("wait")  # back inside: plans again
        assert solved_and_valid(replanner, replanner.resolve()) == ["walk(l0, l1)", "walk(l1, l2)", "walk(l2, l3)"]


def test_bad_params_are_refused_when_the_replanner_is_made() -> None:
    with pytest.raises(ValueError, match="objective"):
        Replanner(Road().problem, name="portfolio-replanner", params={"objective": "speed"})


def test_the_end_of_the_with_block_stops_its_workers() -> None:
    """What `replanner[portfolio]` (UP's meta-engine over the oneshot engine) leaves running, this one stops."""
    world = Road()
    before = set(descendants())
    with Replanner(world.problem, name="portfolio-replanner") as replanner:
        assert replanner.resolve().status in SOLVED
        assert set(descendants()) - before  # the planner's warm workers
    assert poll(lambda: set(descendants()) - before, lambda left: not left, 5, every=0.1) == set()
