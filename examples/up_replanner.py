"""The portfolio as unified-planning's replanner: `Replanner(problem, name="portfolio-replanner")` keeps one
warm planner while the problem changes under it (initial values, goals, actions), each plan checked by UP's own
validator.

    python examples/up_replanner.py
"""

from __future__ import annotations

from unified_planning.shortcuts import (
    BoolType,
    Fluent,
    InstantaneousAction,
    Object,
    PlanValidator,
    Problem,
    Replanner,
    UserType,
    get_environment,
)

import portfolio.up  # noqa: F401  (registers the "portfolio-replanner" engine with UP's factory)

ROOM = UserType("Room")
AT = Fluent("at", BoolType(), r=ROOM)
DOOR = Fluent("door", BoolType(), a=ROOM, b=ROOM)
PARCEL_AT = Fluent("parcel_at", BoolType(), r=ROOM)
HOLDING = Fluent("holding", BoolType())


def corridor() -> tuple[Problem, list[Object]]:
    """A robot in the hall of a one-way corridor hall -> office -> lab -> store must reach the store."""
    walk = InstantaneousAction("walk", a=ROOM, b=ROOM)
    a, b = walk.parameters
    walk.add_precondition(AT(a))
    walk.add_precondition(DOOR(a, b))
    walk.add_effect(AT(a), False)
    walk.add_effect(AT(b), True)
    pick = InstantaneousAction("pick", r=ROOM)
    (r,) = pick.parameters
    pick.add_precondition(AT(r))
    pick.add_precondition(PARCEL_AT(r))
    pick.add_effect(PARCEL_AT(r), False)
    pick.add_effect(HOLDING, True)
    problem = Problem("corridor")
    for fluent in (AT, DOOR, PARCEL_AT, HOLDING):
        problem.add_fluent(fluent, default_initial_value=False)
    problem.add_actions([walk, pick])
    rooms = [Object(name, ROOM) for name in ("hall", "office", "lab", "store")]
    problem.add_objects(rooms)
    for here, there in zip(rooms, rooms[1:]):
        problem.set_initial_value(DOOR(here, there), True)
    problem.set_initial_value(AT(rooms[0]), True)
    problem.set_initial_value(PARCEL_AT(rooms[1]), True)
    problem.add_goal(AT(rooms[-1]))
    return problem, rooms


def teleport() -> InstantaneousAction:
    action = InstantaneousAction("teleport", a=ROOM, b=ROOM)
    a, b = action.parameters
    action.add_precondition(AT(a))
    action.add_effect(AT(a), False)
    action.add_effect(AT(b), True)
    return action


def main() -> None:
    get_environment().credits_stream = None  # UP prints each engine's credits otherwise
    problem, (hall, office, lab, store) = corridor()
    with (
        Replanner(problem, name="portfolio-replanner") as replanner,
        PlanValidator(name="sequential_plan_validator") as validator,
    ):

        def show(change: str) -> None:
            result = replanner.resolve(timeout=10)
            line = f"{change}: {result.status.name}"
            if result.plan is not None:
                verdict = validator.validate(replanner.problem, result.plan).status.name
                line += f" ({verdict}) " + ", ".join(str(step) for step in result.plan.actions)
            print(line)

        show("as given")
        replanner.update_initial_value(AT(hall), False)
        replanner.update_initial_value(AT(lab), True)
        show("robot moved to the lab")
        replanner.update_initial_value(AT(lab), False)
        replanner.update_initial_value(AT(hall), True)
        replanner.add_goal(HOLDING)
        show("back in the hall, parcel wanted")
        replanner.remove_goal(HOLDING)
        replanner.add_action(teleport())
        show("parcel not wanted, teleport added")
        replanner.remove_action("teleport")
        replanner.remove_action("walk")
        show("teleport and walk removed")


if __name__ == "__main__":
    main()
