"""What every adapter needs: typed actions planned one step at a time from a runtime's own state.

A runtime that owns the control flow (a LangGraph graph, an LLM agent calling tools) cannot hand it to
`Agent.run`; instead it keeps a `Board` (the objects by type and by name, the facts, the actions excluded and the
critiques so far) in its own state and asks a `Session` two things: *what next?* (`next_steps`: a validated plan
from the board, through the shared `Planner`, off the event loop) and *do this step* (`execute`: the same
binding and effect rules as `Agent`, a failure classified and turned into an exclusion plus a critique, so the
next `next_steps` routes around it). Outcomes are recorded in a trace store when one is given, so learned costs
apply to runtimes that are not ours. Boards are values: `execute` returns a new one, as graph state wants.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from domains.model import Atom, GroundAction, Task
from domains.typed_actions import ReplanRequested, TypedAction, action, compile_actions, known_names, registered_types
from domains.validate import goal_reached
from portfolio.agent.failures import Failure, classify, default_critique, describe
from portfolio.engine.results import PlanResult


@dataclass(frozen=True)
class Board:
    """A runtime's planning state: objects by type key and by binding name, facts, exclusions, critiques."""

    objects: dict[str, Any] = field(default_factory=dict)
    named: dict[str, Any] = field(default_factory=dict)
    facts: frozenset[Atom] = frozenset()
    excluded: tuple[str, ...] = ()
    critiques: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepReport:
    action: str  # PDDL form, e.g. "(find-flight)"
    outcome: Literal["success", "failure", "replan"]
    ms: float
    error: str | None = None
    category: str | None = None


class Session:
    """Plans and executes `actions` towards `goal` step by step for a runtime that keeps the `Board`.
    `planner`: a shared `portfolio.planner.Planner` (default: the agent cascade, owned and closed here);
    `store`: a `traces.TraceStore` for step outcomes."""

    def __init__(
        self,
        actions: Sequence[TypedAction | Any],
        goal: Any,
        *,
        planner: Any = None,
        store: Any = None,
        features: dict | None = None,
    ) -> None:
        from portfolio.delegates.registry import AGENT_DELEGATES, build_stages

        self.actions = [a if isinstance(a, TypedAction) else action(a) for a in actions]
        self.by_name = {a.name: a for a in self.actions}
        self.types = registered_types(self.actions)
        self.goal, self.store, self.features = goal, store, features
        self._own = planner is None
        if planner is None:
            from portfolio.planner import Planner

            planner = Planner(build_stages(AGENT_DELEGATES), warm=False)
        self.planner = planner
        self._tasks: dict[tuple, Task] = {}
        self.run_id = store.start_run(None, str(goal)) if store is not None else None
        self._steps = 0

    def start(self, *inputs: Any, **named: Any) -> Board:
        """The board for `inputs` (bound by type) and `named` inputs (bound by name)."""
        executor = self._executor(Board(named=dict(named)))  # the named inputs are known names from the start
        facts = executor.put_inputs(inputs, named)
        return Board(dict(executor.board), dict(executor.named), frozenset(facts))

    def names(self, board: Board) -> frozenset[str]:
        return known_names(self.actions, board.named)

    def task(self, board: Board) -> Task:
        names = self.names(board)
        key = (board.facts, names)
        if key not in self._tasks:
            goals = tuple(self.goal) if isinstance(self.goal, (tuple, list)) else (self.goal,)
            self._tasks[key] = compile_actions(self.actions, goals, board.facts, names)
        return self._tasks[key]

    def done(self, board: Board) -> bool:
        return goal_reached(self.task(board), board.facts)

    async def next_steps(self, board: Board) -> PlanResult:
        """A validated plan from the board, avoiding the excluded actions (planned off the event loop)."""
        return await self.planner.aplan(
            self.task(board),
            init=board.facts,
            excluded=list(board.excluded),
            critiques=list(board.critiques),
            features=self.features,
        )

    async def execute(self, board: Board, step: str) -> tuple[Board, StepReport]:
        """Run one action (by name or PDDL form) on the board; never raises for the action's own failures."""
        name = step.strip("()").split()[0]
        if name not in self.by_name:
            raise ValueError(f"unknown action {step!r}; actions: {', '.join(sorted(self.by_name))}")
        ground = GroundAction(name, ())
        executor = self._executor(board)
        started = time.monotonic()
        try:
            observation = await executor.aexecute(ground, board.facts, board.facts)
        except ReplanRequested as request:
            facts = executor.apply_updates(board.facts, request.updates)
            report = StepReport(str(ground), "replan", _ms(started), f"replan requested: {request.reason}")
            after = Board(
                dict(executor.board), dict(executor.named), facts, board.excluded, board.critiques + (request.reason,)
            )
        except Exception as error:
            category, side_effects = classify(error)
            text = default_critique(Failure(str(ground), category, side_effects, describe(error)))
            report = StepReport(str(ground), "failure", _ms(started), describe(error), category.value)
            after = replace(board, excluded=board.excluded + (str(ground),), critiques=board.critiques + (text,))
        else:
            report = StepReport(str(ground), "success", _ms(started))
            after = Board(
                dict(executor.board),
                dict(executor.named),
                frozenset(observation.state),
                board.excluded,
                board.critiques,
            )
        self._record(ground, report)
        return after, report

    def _executor(self, board: Board) -> Any:
        from portfolio.agent.executors import _TypedExecutor

        executor = _TypedExecutor(self.by_name, self.types, dict(board.objects), self.names(board))
        executor.named = dict(board.named)
        return executor

    def _record(self, ground: GroundAction, report: StepReport) -> None:
        if self.store is None or self.run_id is None:
            return
        from traces.records import StepRecord

        self.store.record_steps([StepRecord(
            run_id=self.run_id, step=self._steps, action=ground.name, args=ground.args, outcome=report.outcome,
            error=report.error, failure_category=report.category, duration_ms=report.ms,
            features=self.features or {},
        )])  # fmt: skip
        self._steps += 1

    def close(self) -> None:
        if self._own:
            self.planner.close()


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


__all__ = ["Board", "Session", "StepReport"]
