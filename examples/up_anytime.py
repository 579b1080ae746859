"""The portfolio as unified-planning's anytime planner: `AnytimePlanner(name="portfolio")` yields a first plan
at once, then a cheaper one, each checked by UP's own validator.

    python examples/up_anytime.py
"""

from __future__ import annotations

from unified_planning.model.metrics import MinimizeActionCosts
from unified_planning.shortcuts import (
    AnytimePlanner,
    BoolType,
    Fluent,
    InstantaneousAction,
    Object,
    PlanValidator,
    Problem,
    UserType,
    get_environment,
)

import portfolio.up  # noqa: F401  (registers the "portfolio" engines with UP's factory)


def courier() -> Problem:
    """From the depot to the client: four streets on foot (2 each) or one taxi ride (10)."""
    place = UserType("Place")
    at = Fluent("at", BoolType(), p=place)
    street = Fluent("street", BoolType(), a=place, b=place)
    walk = InstantaneousAction("walk", a=place, b=place)
    a, b = walk.parameters
    walk.add_precondition(at(a))
    walk.add_precondition(street(a, b))
    walk.add_effect(at(a), False)
    walk.add_effect(at(b), True)
    taxi = InstantaneousAction("taxi", a=place, b=place)
    a, b = taxi.parameters
    taxi.add_precondition(at(a))
    taxi.add_effect(at(a), False)
    taxi.add_effect(at(b), True)
    problem = Problem("courier")
    problem.add_fluent(at, default_initial_value=False)
    problem.add_fluent(street, default_initial_value=False)
    problem.add_actions([walk, taxi])
    places = [Object(name, place) for name in ("depot", "bridge", "market", "park", "client")]
    problem.add_objects(places)
    for here, there in zip(places, places[1:]):
        problem.set_initial_value(street(here, there), True)
    problem.set_initial_value(at(places[0]), True)
    problem.add_goal(at(places[-1]))
    problem.add_quality_metric(MinimizeActionCosts({walk: 2, taxi: 10}))
    return problem


def main() -> None:
    get_environment().credits_stream = None  # UP prints each engine's credits otherwise
    problem = courier()
    with AnytimePlanner(name="portfolio") as planner, PlanValidator(name="sequential_plan_validator") as validator:
        for result in planner.get_solutions(problem, timeout=10):
            verdict = validator.validate(problem, result.plan).status.name
            steps = ", ".join(str(step) for step in result.plan.actions)
            print(f"{result.status.name}: cost {result.metrics['cost']} ({verdict}) {steps}")


if __name__ == "__main__":
    main()
