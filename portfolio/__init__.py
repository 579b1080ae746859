"""portfolio-planner: validated plans from a hard-budgeted cascade of planners, for agent runtimes.

    from portfolio import Planner
    from domains.load import load_task

    with Planner() as planner:
        result = planner.plan(load_task("domain.pddl", "problem.pddl"))
        print(result.status, result.plan)
"""

from portfolio.engine.results import Attempt, PlanRequest, PlanResult, Status

__all__ = [
    "Agent", "Attempt", "PlanRequest", "PlanResult", "Planner", "PortfolioDecomposition", "ReplanRequested",
    "Status", "Tier", "action", "replan_when",
]


def __getattr__(name: str):
    # Lazy, so `import portfolio` stays cheap for the CLI's cold start.
    if name == "Planner":
        from portfolio.planner import Planner

        return Planner
    if name in ("Agent", "action", "replan_when", "ReplanRequested"):
        from portfolio import agent

        return getattr(agent, name)
    if name in ("PortfolioDecomposition", "Tier"):
        from portfolio.engine import cascade

        return getattr(cascade, name)
    raise AttributeError(name)
