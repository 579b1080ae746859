"""Exact plans under given costs, and the costs a planner actually planned with: the benchmark's yardsticks.

    exact = ExactSearch("delivery")                 # "routes": RouteSearch; else Fast Downward A* with LM-cut
    result = exact.solve(task, costs)               # the optimal plan under `costs` (a mapping or a cost model)
    recorder = CostRecorder(planner)                # after planner.plan(...): recorder.costs, what it was given
    quality_call(index, task, result, optimum, recorder.costs)  # the call's cost beside the optimum's

`ExactSearch` is never the measured arms' search: the oracle arm (true costs) and the plan-quality yardstick
(the optimum under the very costs a learned call planned with) use it. For the routes domain Dijkstra
(`RouteSearch`) is exact; for every other domain Fast Downward's `seq-opt-lmcut` alias (A* with the admissible
LM-cut heuristic) runs alone with a generous budget, and a result that is not a plan of that search raises:
a yardstick that silently fell back to a satisficing search would measure nothing. Fast Downward takes integer
costs (`portfolio.delegates.fast_downward.sas.COST_SCALE` = 1000: three decimals), so "optimal" is up to 0.0005 per
step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from domains.model import Task, action_cost
from portfolio.engine.results import PlanRequest, PlanResult

EXACT_ALIAS = "seq-opt-lmcut"
EXACT_BUDGET_S = 60.0

CostModel = Callable[[Sequence[str]], dict[str, float]]


class ExactError(RuntimeError):
    """The exact search did not return a proved-optimal plan (budget, or a task it cannot solve)."""


class ExactSearch:
    """Optimal plans for one domain's tasks under given costs (module docstring)."""

    def __init__(self, domain: str, budget_s: float = EXACT_BUDGET_S) -> None:
        from portfolio.delegates.registry import build_stages
        from portfolio.engine.cascade import PortfolioDecomposition
        from portfolio.engine.tiers import Stage

        self.domain = domain
        if domain == "routes":
            from portfolio.benchsuite.worlds.route_search import RouteSearch

            stages: list[Stage] = [RouteSearch()]
        else:
            stages = build_stages(("fast-downward",), budget_s=budget_s, fd_alias=EXACT_ALIAS, fd_workers=1)
        # no step elimination: an optimal plan has no step to remove, and the yardstick must be the search's own
        self.cascade = PortfolioDecomposition(stages, carry_over=False, eliminate_steps=False)
        self._cache: dict[tuple, PlanResult] = {}

    def solve(self, task: Task, costs: Mapping[str, float] | CostModel) -> PlanResult:
        """The optimal plan of `task` under `costs` (grounded action in PDDL form -> cost; actions it does not
        list cost what the task says). A mapping's answers are cached by task and costs."""
        key = None
        if isinstance(costs, Mapping):
            key = (task.fingerprint, frozenset(costs.items()))
            if key in self._cache:
                return self._cache[key]
            given = dict(costs)

            def model(grounded: Sequence[str]) -> dict[str, float]:
                return {name: given[name] for name in grounded if name in given}

            cost_model: CostModel = model
        else:
            cost_model = costs
        result = self.cascade.solve(PlanRequest(task=task, cost_function=cost_model))
        if not result.solved:
            raise ExactError(
                f"exact search on {task.problem.name}: {result.status.value}: "
                + "; ".join(f"{a.delegate}: {a.reason}" for a in result.attempts)
            )
        search = next((a.details.get("search") for a in result.attempts if a.delegate == result.delegate), None)
        if result.delegate != "route-search" and search != EXACT_ALIAS:
            raise ExactError(
                f"exact search on {task.problem.name}: the plan came from {result.delegate} "
                f"({search}), not {EXACT_ALIAS}"
            )
        if key is not None:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = result
        return result

    def close(self) -> None:
        self.cascade.close()


def plan_cost_under(task: Task, plan, costs: Mapping[str, float]) -> float:
    """The cost of `plan` under `costs` (actions it does not list cost what the task says)."""
    from domains.ground_text import ground_action_text

    total = 0.0
    for step in plan:
        key = ground_action_text(step)
        total += costs[key] if key in costs else action_cost(task, step)
    return total


def quality_call(
    index: int,
    task: Task,
    result: PlanResult,
    optimum: PlanResult,
    costs: Mapping[str, float],
    digits: int | None = None,
) -> dict:
    """One learned call for `scores.quality`: the plan's cost and the proved optimum's, both under the learned
    `costs` (rounded to `digits` places when given), and the time the call took against its budget."""
    from portfolio.engine.cascade import CLASSICAL_BUDGET_S

    cost, best = plan_cost_under(task, result.plan, costs), plan_cost_under(task, optimum.plan, costs)
    if digits is not None:
        cost, best = round(cost, digits), round(best, digits)
    return {
        "episode": index,
        "cost": cost,
        "optimum": best,
        "ms": result.elapsed_ms,
        "budget_ms": CLASSICAL_BUDGET_S * 1000,
    }


class CostRecorder:
    """Keeps the costs a `Planner` handed its delegates on its last call (`costs`: grounded action -> cost, {}
    without learned costs; `calls`: how many times the delegates asked). It wraps the planner's cascade, so the
    planner plans exactly as without it; under Thompson sampling every ask draws afresh, and `costs` holds the
    last ask's (the one the planner's own success probability uses)."""

    def __init__(self, planner) -> None:
        self.costs: dict[str, float] = {}
        self.calls = 0
        inner = planner.cascade.solve

        def solve(request: PlanRequest) -> PlanResult:
            self.costs, self.calls = {}, 0
            if request.cost_function is None:
                return inner(request)
            given = request.cost_function

            def recording(grounded: Sequence[str]) -> dict[str, float]:
                answer = given(grounded)
                self.costs, self.calls = dict(answer), self.calls + 1
                return answer

            return inner(replace(request, cost_function=recording))

        planner.cascade.solve = solve
