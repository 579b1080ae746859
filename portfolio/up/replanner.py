"""`PortfolioReplanner`: `Replanner(problem, name="portfolio-replanner")` once `portfolio.up` is imported.

UP's replanner interface: the engine is made with a problem, the caller changes it (`update_initial_value`,
`add_goal`, `remove_goal`, `add_action`, `remove_action`) and asks for a plan (`resolve`) as often as it
likes. Every change applies to the replanner's own copy of the problem (the caller's is never touched), with
the meaning UP's generic `replanner[...]` meta-engine gives it; `resolve` plans the copy as it stands with one
`PortfolioEngine` kept across calls, so its planner (the translator and pyperplan workers, the trace store,
the learned costs) is started once and stays warm, and `destroy()` stops it. UP's generic
`replanner[portfolio]` also keeps one oneshot engine, but its `destroy()` does not reach it: the workers
outlive a `with Replanner(...)` block.

**What it takes** (`supported_kind`): the oneshot engine's kind (`portfolio.up.engine`), the problem as the
changes have left it. A problem outside it (from the start or after `add_action` of, say, a durative action)
is answered UNSUPPORTED_PROBLEM by `resolve`, with the reason in the log messages, never an exception; with
`name=` UP only warns at construction that it "cannot establish" support. Statuses, metrics, `timeout` and
`output_stream` are the oneshot engine's; so are the parameters (`traces`, `weight`, `objective`, `budget_s`,
`decomposer_budget_s`).

Removing a goal or an action the problem does not have warns (raises `UPUsageError` with
`error_on_failed_checks`), as in UP's meta-engine. `destroy()` (the end of a `with` block) stops the workers.
"""

from __future__ import annotations

import threading
from fractions import Fraction
from pathlib import Path
from typing import IO, Any
from warnings import warn

from unified_planning.engines import Engine, PlanGenerationResult
from unified_planning.engines.mixins import ReplannerMixin
from unified_planning.exceptions import UPUsageError
from unified_planning.model import ProblemKind
from unified_planning.plans import PlanKind

from portfolio.engine.cascade import CLASSICAL_BUDGET_S, DECOMPOSER_BUDGET_S
from portfolio.up.engine import PortfolioEngine

NAME = "portfolio-replanner"


class PortfolioReplanner(Engine, ReplannerMixin):
    """The portfolio behind UP's replanner interface (module docstring)."""

    def __init__(
        self,
        problem: Any,
        error_on_failed_checks: bool = False,
        traces: str | Path | None = None,
        weight: float = 5.0,
        objective: str = "risk",
        budget_s: float = CLASSICAL_BUDGET_S,
        decomposer_budget_s: float = DECOMPOSER_BUDGET_S,
    ) -> None:
        Engine.__init__(self)
        # the parameters are checked (a `ValueError` naming the bad one) before UP's check of the problem
        self._engine = PortfolioEngine(traces, weight, objective, budget_s, decomposer_budget_s)
        ReplannerMixin.__init__(self, problem, error_on_failed_checks)
        self._changes = threading.Lock()  # a change and a resolve do not interleave

    @property
    def name(self) -> str:
        return NAME

    @staticmethod
    def supported_kind() -> ProblemKind:
        return PortfolioEngine.supported_kind()

    @staticmethod
    def supports(problem_kind: ProblemKind) -> bool:
        return PortfolioEngine.supports(problem_kind)

    @staticmethod
    def supports_plan(plan_kind: PlanKind) -> bool:
        return PortfolioEngine.supports_plan(plan_kind)

    @property
    def problem(self) -> Any:
        """The problem as the changes so far have left it (the replanner's copy: changing it changes the next
        resolve)."""
        return self._problem

    def _resolve(self, timeout: float | None = None, output_stream: IO[str] | None = None) -> PlanGenerationResult:
        """A plan for the problem as it stands: the oneshot engine's `solve` on the same warm planner."""
        with self._changes:
            return self._engine._solve(self._problem, timeout=timeout, output_stream=output_stream)

    def _update_initial_value(self, fluent: Any, value: Any | bool | int | float | Fraction) -> None:
        with self._changes:
            self._problem.set_initial_value(fluent, value)

    def _add_goal(self, goal: Any) -> None:
        with self._changes:
            self._problem.add_goal(goal)

    def _remove_goal(self, goal: Any) -> None:
        with self._changes:
            (wanted,) = self._problem.environment.expression_manager.auto_promote(goal)
            goals = list(self._problem.goals)
            kept = [g for g in goals if g is not wanted]  # expressions are interned: `is` is equality
            self._problem.clear_goals()
            for kept_goal in kept:
                self._problem.add_goal(kept_goal)
        if len(kept) == len(goals):
            self._failed_check(f"goal to remove: {wanted} not found among the problem's goals: {goals}")

    def _add_action(self, action: Any) -> None:
        with self._changes:
            self._problem.add_action(action)

    def _remove_action(self, name: str) -> None:
        with self._changes:
            actions = list(self._problem.actions)
            names = [a.name for a in actions]
            kept = [a for a in actions if a.name != name]
            self._problem.clear_actions()
            self._problem.add_actions(kept)
        if len(kept) == len(actions):
            self._failed_check(f"action to remove: {name} not found among the problem's actions: {names}")

    def _failed_check(self, message: str) -> None:
        """UP's convention for a failed check: nothing with `skip_checks`, else an error or a warning."""
        if self.skip_checks:
            return
        if self.error_on_failed_checks:
            raise UPUsageError(message)
        warn(message, stacklevel=4)

    def destroy(self) -> None:
        """Stop the planner's workers (`with Replanner(...)` calls this at the end of the block)."""
        self._engine.destroy()
