"""The portfolio as a unified-planning engine: a problem built with UP's shortcuts, solved by
`OneshotPlanner(name="portfolio")`, its plan checked by UP's own validator; then a problem it does not take.

    python examples/up_oneshot.py
"""

from __future__ import annotations

import json
import warnings

from unified_planning.model.metrics import MinimizeActionCosts
from unified_planning.shortcuts import (
    GT,
    BoolType,
    Fluent,
    InstantaneousAction,
    IntType,
    Not,
    Object,
    OneshotPlanner,
    PlanValidator,
    Problem,
    UserType,
    get_environment,
)

import portfolio.up  # noqa: F401  (registers the "portfolio" engine with UP's factory)


def delivery() -> Problem:
    """A robot carries a parcel from the hall to the lab; the stairs cost 1, the lift 5 but skips the office."""
    room = UserType("Room")
    at, parcel_at, holding = (
        Fluent("at", BoolType(), r=room),
        Fluent("parcel_at", BoolType(), r=room),
        Fluent("holding", BoolType()),
    )
    link = Fluent("link", BoolType(), a=room, b=room)
    walk = InstantaneousAction("walk", a=room, b=room)
    a, b = walk.parameters
    walk.add_precondition(at(a))
    walk.add_precondition(link(a, b))
    walk.add_effect(at(a), False)
    walk.add_effect(at(b), True)
    lift = InstantaneousAction("lift", a=room, b=room)
    a, b = lift.parameters
    lift.add_precondition(at(a))
    lift.add_effect(at(a), False)
    lift.add_effect(at(b), True)
    pick = InstantaneousAction("pick", r=room)
    (r,) = pick.parameters
    pick.add_precondition(at(r))
    pick.add_precondition(parcel_at(r))
    pick.add_precondition(Not(holding))
    pick.add_effect(parcel_at(r), False)
    pick.add_effect(holding, True)
    drop = InstantaneousAction("drop", r=room)
    (r,) = drop.parameters
    drop.add_precondition(at(r))
    drop.add_precondition(holding)
    drop.add_effect(holding, False)
    drop.add_effect(parcel_at(r), True)

    problem = Problem("delivery")
    for fluent in (at, parcel_at, holding, link):
        problem.add_fluent(fluent, default_initial_value=False)
    for action in (walk, lift, pick, drop):
        problem.add_action(action)
    hall, office, lab = Object("hall", room), Object("office", room), Object("lab", room)
    problem.add_objects([hall, office, lab])
    problem.set_initial_value(at(hall), True)
    problem.set_initial_value(parcel_at(hall), True)
    for x, y in ((hall, office), (office, lab)):
        problem.set_initial_value(link(x, y), True)
        problem.set_initial_value(link(y, x), True)
    problem.add_goal(parcel_at(lab))
    problem.add_quality_metric(MinimizeActionCosts({walk: 1, lift: 5, pick: 1, drop: 1}))
    return problem


def battery() -> Problem:
    """A numeric fluent: outside what the portfolio takes."""
    charge = Fluent("charge", IntType())
    use = InstantaneousAction("use")
    use.add_precondition(GT(charge, 0))
    use.add_decrease_effect(charge, 1)
    problem = Problem("battery")
    problem.add_fluent(charge, default_initial_value=3)
    problem.add_action(use)
    problem.add_goal(GT(1, charge))
    return problem


def main() -> None:
    get_environment().credits_stream = None  # UP prints each engine's credits otherwise
    problem = delivery()
    with OneshotPlanner(name="portfolio") as planner:
        result = planner.solve(problem, timeout=10)
        print(result.status.name)
        for step in result.plan.actions:
            print(" ", step)
        metrics = result.metrics
        print("cost", metrics["cost"], "by", metrics["delegate"], "in", metrics["elapsed_ms"], "ms")
        print("first attempt:", json.loads(metrics["attempts"])[0]["delegate"])
        with PlanValidator(name="sequential_plan_validator") as validator:
            print("UP's validator:", validator.validate(problem, result.plan).status.name)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # UP warns that it cannot establish support, then asks the engine
            refused = planner.solve(battery())
        print(refused.status.name, "-", refused.log_messages[0].message)


if __name__ == "__main__":
    main()
