"""`Agent`: typed Python actions (or PDDL actions with handlers) planned, executed, observed and replanned.

    from portfolio.agent import Agent, action

    @action(cost=1.0)
    def find_person(text: UserInput) -> Person: ...

    @action(goal=True)
    def write_up(person: Person, news: News) -> WriteUp: ...

    with Agent([find_person, fetch_news, write_up], traces="traces.db") as agent:
        result = agent.run(UserInput("..."), goal=WriteUp)
        result.output, result.steps, result.replans
        agent.learn()          # retrain the failure model on the recorded steps; later plans use its costs

Typed actions are compiled once per goal into a tiny planning task (`domains.typed_actions`) and planned with
the same cascade as everything else, led by the in-process exact search (`portfolio.delegates.typed_search`)
so that replanning costs milliseconds; Fast Downward and pyperplan stay behind it for larger tasks and Fast
Downward grounds the task for learned costs. Objects live on a blackboard keyed by type: a parameter of type
`Person` receives the latest `Person` produced or given; objects given by keyword or produced by named outputs
also live under their name, and a parameter whose name is such a name binds that object (`domains.typed_actions`
explains the facts). `Agent.for_task` runs a PDDL task instead, with handlers bound to its action names. The
loop itself is `portfolio.agent.loop`; how one step is carried out, `portfolio.agent.executors`.

Async: `await agent.arun(...)` runs the same loop on the event loop: coroutine actions are awaited (under their
`timeout`, whose expiry cancels the coroutine and counts as a transient failure), plain functions run in a
worker thread, planning runs in a worker thread (`Planner.aplan`), so many agents share one planner. `run()`
also accepts coroutine actions outside an event loop (each one runs to completion in `asyncio.run`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domains.model import Atom, State, Task
from domains.typed_actions import (
    HINTS,
    ReplanRequested,
    TypedAction,
    action,
    compile_actions,
    known_names,
    parse_literal,
    registered_types,
    type_name,
)
from portfolio.agent.executors import _TaskExecutor, _TypedExecutor
from portfolio.agent.failures import Critic, InfeasibleFailure
from portfolio.agent.loop import arun_loop, run_loop
from portfolio.agent.loop_types import LoopConfig, Reflection, RunResult, VetoCheck
from portfolio.agent.observability import Counters


@dataclass
class _Prepared:
    """One run, ready for the loop."""

    task: Task
    start: State
    executor: Any
    goal_types: tuple
    run_id: str | None
    options: dict


def _running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Agent:
    """Plans and executes typed actions (see the module docstring).

    `trigger` (`every-step`, `on-failure`, `progress`), `window` and `threshold` choose when to replan;
    `limits` are further `LoopConfig` fields (max_steps, max_replans, max_adaptations, max_seconds,
    max_retries, backoff_s, loop_limit). `check(step, state)` may veto a side-effecting action (return False or
    a reason); `critic(failure)` writes critiques (an LLM, say); `reflection` (e.g.
    `portfolio.agent.reflection.LLMReflection`) vetoes side-effecting steps before and checks every step after
    execution (off by default). `traces`: a trace store path for steps, plans and learned costs; `explore`
    how learned costs explore (`cautious`, the default, `thompson` or `optimistic`; the deprecated names `mean`
    and `ucb` work, with a warning; see `learning.explore`); `cost_weight` is their lambda; `learn_every=N`
    retrains the failure model after every N finished runs (as `learn()` does), so a long-lived agent's plans
    follow what it has recorded without a separate `portfolio retrain`; `costs()` shows what each grounded
    action is priced at. `planner`: bring your own `Planner` (one planner can serve many
    agents, also concurrently under `arun`). `objective="time"` prices steps by their expected time to success
    (`learning.objective`) with this loop's `max_retries`, `replan_ms` (None: learned) and `side_effect_weight`;
    a planner brought along has its own objective, so these are refused with one.
    """

    def __init__(
        self,
        actions: Sequence[TypedAction | Callable[..., Any]] = (),
        *,
        goal: Any = None,
        traces: str | os.PathLike | None = None,
        trigger: str = "on-failure",
        window: int = 5,
        threshold: float = 0.3,
        check: VetoCheck | None = None,
        critic: Critic | None = None,
        reflection: Reflection | None = None,
        features: dict | None = None,
        cost_weight: float | None = None,
        explore: str | None = None,
        budget_s: float = 1.0,
        planner: Any = None,
        warm: bool = True,
        learn_every: int | None = None,
        objective: str | None = None,
        side_effect_weight: float | None = None,
        replan_ms: float | None = None,
        **limits: Any,
    ) -> None:
        if learn_every is not None and (
            isinstance(learn_every, bool) or not isinstance(learn_every, int) or learn_every < 1
        ):
            raise ValueError(f"learn_every must be a whole number >= 1, got {learn_every!r}")
        if learn_every is not None and traces is None:
            raise ValueError("learn_every needs a trace store: Agent(..., traces='traces.db', learn_every=N)")
        self.learn_every = learn_every
        self._finished_runs = 0
        self.actions = [a if isinstance(a, TypedAction) else action(a) for a in actions]
        self.by_name = {a.name: a for a in self.actions}
        self.types = registered_types(self.actions)
        goals = [t for a in self.actions if a.goal for t in a.outputs]
        self.goal = goal if goal is not None else (goals[0] if goals else None)
        self.config = LoopConfig(trigger=trigger, window=window, threshold=threshold, **limits)
        self.check, self.critic, self.features, self.reflection = check, critic, features, reflection
        self.counters = Counters()
        self.task: Task | None = None  # set by for_task
        self._handlers: _TaskExecutor | None = None
        self._tasks: dict[tuple, Task] = {}
        self._own_planner = planner is None
        timing = {"objective": objective, "side_effect_weight": side_effect_weight, "replan_ms": replan_ms}
        if planner is not None and any(v is not None for v in timing.values()):
            given = ", ".join(k for k, v in timing.items() if v is not None)
            raise ValueError(f"{given}: the planner's own (Planner(objective=..., time=TimeParams(...)))")
        if planner is None:
            from learning.objective import DEFAULT_SIDE_EFFECT_WEIGHT, TimeParams, check_objective
            from portfolio.planner import Planner

            weight: dict[str, Any] = {} if cost_weight is None else {"cost_weight": cost_weight}  # None: the default
            from portfolio.delegates.registry import AGENT_DELEGATES, build_stages

            # the agent's cascade: in-process exact search first, then Fast Downward and pyperplan, one tier
            if side_effect_weight is None:
                side_effect_weight = DEFAULT_SIDE_EFFECT_WEIGHT
            time = TimeParams(self.config.max_retries, replan_ms, side_effect_weight)  # the loop's retry limit
            planner = Planner(
                build_stages(AGENT_DELEGATES, budget_s), traces=traces, warm=warm, explore=explore,
                objective=check_objective(objective) if objective is not None else None, time=time, **weight,
            )  # fmt: skip
        self.planner = planner
        self.store = None
        if traces is not None:
            from traces.store import TraceStore

            self.store = TraceStore(traces)

    @classmethod
    def for_task(
        cls,
        task: Task,
        handlers: Mapping[str, Callable[..., Any]],
        *,
        hints: Mapping[str, str] | None = None,
        side_effects: Iterable[str] = (),
        **options: Any,
    ) -> Agent:
        """An agent for a PDDL task: `handlers` maps each action name of the task to a function called with the
        grounded arguments (object names); `hints` maps action names to always/conditional/never."""
        names = {schema.name for schema in task.domain.actions}
        missing = sorted(names - set(handlers))
        unknown = sorted(set(handlers) - names) + sorted(set(hints or {}) - names)
        if missing or unknown:
            raise ValueError(
                f"handlers must cover the actions of domain '{task.domain.name}' exactly: "
                f"missing {missing or 'none'}, unknown {unknown or 'none'}"
            )
        bad = {k: v for k, v in (hints or {}).items() if v not in HINTS}
        if bad:
            raise ValueError(f"hints must be one of {', '.join(HINTS)}: got {bad}")
        agent = cls((), **options)
        agent.task = task
        agent._handlers = _TaskExecutor(handlers, dict(hints or {}), side_effects)
        return agent

    def compiled(self, goal: Any, init: frozenset[Atom], names: Iterable[str] = ()) -> Task:
        """The task of this agent's typed actions for `goal` (cached: one translation per goal, start and
        keyword-input names)."""
        goals = tuple(goal) if isinstance(goal, (tuple, list)) else (goal,)
        names = frozenset(names)
        key = (tuple(type_name(g) if not (isinstance(g, str) and g.startswith("(")) else g for g in goals), init, names)
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = compile_actions(self.actions, goals, init, names)
        return task

    def run(
        self,
        *inputs: Any,
        goal: Any = None,
        facts: Iterable[str] = (),
        features: dict | None = None,
        init: Iterable[str] | None = None,
        **named: Any,
    ) -> RunResult:
        """Reach `goal` (a type, tuple of types or literal strings; default: the goal action's output) from the
        `inputs` objects (bound by type), the `named` ones (bound by name, e.g. `source=City("Oslo")`) and extra
        `facts`. For a PDDL agent, `init` literals replace the task's initial state.
        Returns the `RunResult` (output: the goal object, steps, replans, status and reason)."""
        if any(a.is_async for a in self.actions) and _running_loop():
            raise RuntimeError("this agent has async actions and an event loop is running: use `await agent.arun()`")
        run = self._prepare(inputs, named, goal, facts, features, init)
        result = run_loop(self.planner, run.task, run.start, run.executor, self.config, **run.options)
        return self._finish(run, result)

    async def arun(
        self,
        *inputs: Any,
        goal: Any = None,
        facts: Iterable[str] = (),
        features: dict | None = None,
        init: Iterable[str] | None = None,
        **named: Any,
    ) -> RunResult:
        """`run` on the event loop (module docstring): `await agent.arun(source=City("Oslo"), goal=Ticket)`."""
        run = self._prepare(inputs, named, goal, facts, features, init)
        result = await arun_loop(self.planner, run.task, run.start, run.executor, self.config, **run.options)
        return self._finish(run, result)

    def costs(
        self,
        *inputs: Any,
        goal: Any = None,
        facts: Iterable[str] = (),
        features: dict | None = None,
        init: Iterable[str] | None = None,
        **named: Any,
    ) -> dict:
        """Grounded action (PDDL form) -> `portfolio.ActionCost` for the task a `run` with the same arguments
        would plan, from the planner's current model: `base_cost`, `p_fail` (the posterior mean) with its 90%
        `interval`, `cost` and the explore policy's `charge` in it, and `evidence` (`portfolio.Evidence`: steps
        and failures recorded, steps since the last change, runs since last seen; None where the action was
        never recorded); {} before any model is trained (`learn()`, `learn_every`). docs/learning.md explains
        each number."""
        features = features if features is not None else self.features
        task, _, start, _ = self._task_and_start(inputs, named, goal, facts, init)
        return self.planner.learned_costs(task, init=start, features=features)

    def _task_and_start(
        self,
        inputs: Sequence[Any],
        named: Mapping[str, Any],
        goal: Any,
        facts: Iterable[str],
        init: Iterable[str] | None,
    ) -> tuple[Task, Any, frozenset[Atom], tuple]:
        executor: Any
        if self.task is not None:
            assert self._handlers is not None
            if named:
                raise ValueError(f"a PDDL agent takes no named inputs (got {', '.join(named)}); pass init=[...]")
            task, executor = self.task, self._handlers
            start = task.problem.init if init is None else frozenset(parse_literal(t)[0] for t in init)
            goal_types: tuple = ()
        else:
            goal = goal if goal is not None else self.goal
            if goal is None:
                raise ValueError("no goal: pass goal=SomeType or mark an action @action(goal=True)")
            names = known_names(self.actions, named)
            executor = _TypedExecutor(self.by_name, self.types, {}, names)
            start = frozenset({parse_literal(t)[0] for t in facts} | executor.put_inputs(inputs, named))
            task = self.compiled(goal, start, named)
            goal_types = tuple(goal) if isinstance(goal, (tuple, list)) else (goal,)
        return task, executor, start, goal_types

    def _prepare(
        self,
        inputs: Sequence[Any],
        named: Mapping[str, Any],
        goal: Any,
        facts: Iterable[str],
        features: dict | None,
        init: Iterable[str] | None,
    ) -> _Prepared:
        features = features if features is not None else self.features
        task, executor, start, goal_types = self._task_and_start(inputs, named, goal, facts, init)
        run_id = None
        if self.store is not None:
            from domains.pddl_writer import formula_to_pddl

            run_id = self.store.start_run(
                task.fingerprint, formula_to_pddl(task.problem.goal), domain=task.domain_fingerprint
            )
        options = dict(
            store=self.store,
            run_id=run_id,
            features=features,
            critic=self.critic,
            check=self.check,
            counters=self.counters,
            reflection=self.reflection,
        )
        return _Prepared(task, start, executor, goal_types, run_id, options)

    def _finish(self, run: _Prepared, result: RunResult) -> RunResult:
        if run.goal_types and result.succeeded:
            found = [run.executor.board.get(type_name(g)) for g in run.goal_types if not str(g).startswith("(")]
            result.output = found[0] if len(found) == 1 else tuple(found)
        if self.store is not None and run.run_id is not None:
            self.store.end_run(run.run_id, "success" if result.succeeded else "conceded")
        self._finished_runs += 1
        # learn_every is refused without a trace store, so the store is there whenever it is set
        if (
            self.learn_every is not None
            and self._finished_runs % self.learn_every == 0
            and self.store is not None
            and self.store.count_steps()
        ):
            self.learn()
        return result

    def learn(self):
        """Retrain the failure model on every recorded step and make the planner use it (between runs)."""
        if self.store is None:
            raise ValueError("learning needs a trace store: Agent(..., traces='traces.db')")
        from learning.retrain import retrain

        info = retrain(self.store)
        self.planner.reload_model()
        return info

    def close(self) -> None:
        if self._own_planner:
            self.planner.close()
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Agent", "InfeasibleFailure", "LoopConfig", "ReplanRequested", "RunResult", "TypedAction", "action"]
