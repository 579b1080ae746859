"""unified-planning engines backed by the portfolio: `import portfolio.up` registers them with UP's factory.

    import portfolio.up  # noqa: F401  (registers the engines)
    from unified_planning.shortcuts import OneshotPlanner

    with OneshotPlanner(name="portfolio") as planner:
        result = planner.solve(problem)      # a PlanGenerationResult with a SequentialPlan

- `OneshotPlanner(name="portfolio")`: the cascade behind UP's oneshot planner interface;
- `AnytimePlanner(name="portfolio")`: a fast plan, then cheaper ones;
- `PlanValidator(name="portfolio")`: the project's plan validator (`domains.validate`) behind UP's;
- `Replanner(problem, name="portfolio-replanner")`: UP's replanner interface over one warm planner
  (`portfolio.up.replanner`).

The first three are `portfolio.up.engine.PortfolioEngine` (statuses, parameters and the kinds of problem it takes
are there).

UP has no plugin entry points: engines reach its factory through `Factory.add_engine(name, module, class)` (done
here, once per environment) or an `up.ini` file naming the same module and class. Registering also makes UP's
meta-engines over the planner available (`oversubscription[portfolio]`, `replanner[portfolio]`, which plans
every resolve from scratch). Importing this
module imports unified-planning (about 2.5 s); `import portfolio` does not.
"""

from __future__ import annotations

from typing import Any

# name, module, class: one engine is the oneshot planner, the anytime planner and the plan validator (UP's
# factory keeps one class per name, whatever the operation mode); a replanner is made with its problem, so it is
# a class of its own
ENGINES = (
    ("portfolio", "portfolio.up.engine", "PortfolioEngine"),
    ("portfolio-replanner", "portfolio.up.replanner", "PortfolioReplanner"),
)


def register(environment: Any = None) -> None:
    """Add the engines to the factory of `environment` (default: UP's global one); a name already there is left
    as it is, so registering twice changes nothing."""
    from unified_planning.environment import get_environment

    factory = (environment or get_environment()).factory
    for name, module, class_name in ENGINES:
        if name not in factory.engines:
            factory.add_engine(name, module, class_name)


register()
