"""The execute-observe-replan loop: plan, run the next action through its handler, observe, record, decide.

    result = run_loop(planner, task, init, executor, LoopConfig(trigger="progress"), store=store)

Each iteration executes the next step of the current plan and observes the state the handler reports. Then:
- a failure is classified (`portfolio.agent.failures`): *persist* retries it with backoff, *refine* excludes the
  grounded action from later plans of this run and adds a critique, *concede* ends the run;
- the replan trigger decides whether to plan again now: `every-step`, `on-failure`, or `progress` (the mean,
  over the last `window` steps of the current generation, of the share of each step's expected effects that
  were not observed, above `threshold`); a per-action hint overrides it (`always`, `conditional` = follow the
  trigger, `never`); an action raising `ReplanRequested` or a `replan_when` predicate always replans;
- whatever the trigger, a plan whose next step is not applicable in the observed state is replaced (trigger
  `plan-invalid`);
- a pre-execution `check` may veto a side-effecting action: the plan is discarded and a new one made without it;
- the same grounded action executed in the same state more than `loop_limit` times is a loop: it is excluded;
- a `reflection` (`portfolio.agent.reflection`, off by default) may veto a side-effecting step before it runs
  (like `check`) and may declare an executed step failed after comparing expected and observed effects.
Limits on steps, replans, adaptations and wall time make the agent concede instead of running forever. Every
executed step (retries included) is written to the trace store as it happens; each replan starts a new
adaptation generation. A step that raised `ReplanRequested` is recorded with outcome `replan`.

One loop, two drivers. `LoopRun.run` (`portfolio.agent.loop_run`) is a generator that *yields* what it needs done
(plan, execute a step, sleep, ask a callback: `portfolio.agent.loop_requests`) and receives the answer (or the
exception, thrown back in), so every decision above is written once. `run_loop` performs the requests synchronously;
`arun_loop` awaits them: coroutine actions run natively on the event loop, planning and blocking callbacks (the LLM
critics) run in worker threads so that many agents share one event loop and one planner. The indirection costs a
generator resume per request, little beside planning (docs/benchmarks.md). What the loop takes and reports
(`LoopConfig`, the `Executor` protocol, `RunResult` and its records) is `portfolio.agent.loop_types`, re-exported
here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any

from domains.model import Atom, Task
from portfolio.agent.failures import Critic
from portfolio.agent.loop_requests import Execute, Plan, Sleep
from portfolio.agent.loop_run import LoopRun
from portfolio.agent.loop_types import (  # re-exported: part of this module's API (`__all__`)
    TRIGGERS,
    Executor,
    LoopConfig,
    Observation,
    Reflection,
    Replan,
    RunResult,
    StepResult,
    VetoCheck,
    divergence,
    effect_literals,
)
from portfolio.agent.observability import Counters, span


def _resume(loop: Generator[Any, Any, RunResult], answer: Any, error: Exception | None) -> tuple[Any, Any]:
    """Send `answer` (or throw `error`) into the loop: (its next request, None), or (None, the RunResult)."""
    try:
        return (loop.throw(error) if error is not None else loop.send(answer)), None
    except StopIteration as stop:
        return None, stop.value


def _settled(perform: Callable[[Any], Any], request: Any) -> tuple[Any, Exception | None]:
    """(what `perform(request)` returns, None), or (None, the exception it raised): what `_resume` sends or throws."""
    try:
        return perform(request), None
    except Exception as raised:
        return None, raised


async def _asettled(answer: Awaitable[Any]) -> tuple[Any, Exception | None]:
    """`_settled` for a coroutine: (what it returns, None), or (None, the exception it raised)."""
    try:
        return await answer, None
    except Exception as raised:
        return None, raised


def run_loop(
    planner: Any,
    task: Task,
    init: Iterable[Atom],
    executor: Executor,
    config: LoopConfig | None = None,
    *,
    store: Any = None,
    run_id: str | None = None,
    features: dict | None = None,
    critic: Critic | None = None,
    check: VetoCheck | None = None,
    counters: Counters | None = None,
    reflection: Reflection | None = None,
) -> RunResult:
    """Execute `task` from `init` with `executor` until the goal holds or the loop concedes (see the module
    docstring). `planner` is a `portfolio.planner.Planner` (anything with its `plan` signature); steps are
    written to `store` (a `traces.TraceStore`) under `run_id` when both are given."""
    run = LoopRun(planner, task, init, executor, config, store, run_id, features, critic, check, counters, reflection)

    def perform(request: Any) -> Any:
        if isinstance(request, Plan):
            return planner.plan(request.task, **request.options)
        if isinstance(request, Execute):
            return executor.execute(request.step, request.state, request.expected)
        if isinstance(request, Sleep):
            return time.sleep(request.seconds)
        if asyncio.iscoroutinefunction(request.fn):  # an async check or critic, outside any event loop
            return asyncio.run(request.fn(*request.args))
        return request.fn(*request.args)

    with span("run", fingerprint=task.fingerprint, run_id=run_id):
        loop = run.run()
        request, done = _resume(loop, None, None)
        while done is None:
            request, done = _resume(loop, *_settled(perform, request))
        return done


async def arun_loop(
    planner: Any,
    task: Task,
    init: Iterable[Atom],
    executor: Executor,
    config: LoopConfig | None = None,
    *,
    store: Any = None,
    run_id: str | None = None,
    features: dict | None = None,
    critic: Critic | None = None,
    check: VetoCheck | None = None,
    counters: Counters | None = None,
    reflection: Reflection | None = None,
) -> RunResult:
    """`run_loop` on the event loop: the executor's `aexecute` runs steps (coroutine actions natively), the
    planner's `aplan` (or `plan` in a worker thread) plans, waits are `asyncio.sleep`s, and blocking callbacks
    (LLM critics) run in worker threads. Same decisions, same records."""
    run = LoopRun(planner, task, init, executor, config, store, run_id, features, critic, check, counters, reflection)
    aplan = getattr(planner, "aplan", None)
    aexecute = getattr(executor, "aexecute", None)

    async def perform(request: Any) -> Any:
        if isinstance(request, Plan):
            if aplan is not None:
                return await aplan(request.task, **request.options)
            return await asyncio.to_thread(planner.plan, request.task, **request.options)
        if isinstance(request, Execute):
            if aexecute is not None:
                return await aexecute(request.step, request.state, request.expected)
            return executor.execute(request.step, request.state, request.expected)
        if isinstance(request, Sleep):
            return await asyncio.sleep(request.seconds)
        if asyncio.iscoroutinefunction(request.fn):
            return await request.fn(*request.args)
        if request.blocking:
            return await asyncio.to_thread(request.fn, *request.args)
        return request.fn(*request.args)

    with span("run", fingerprint=task.fingerprint, run_id=run_id):
        loop = run.run()
        request, done = _resume(loop, None, None)
        while done is None:
            request, done = _resume(loop, *await _asettled(perform(request)))
        return done


__all__ = [
    "TRIGGERS",
    "Executor",
    "LoopConfig",
    "Observation",
    "Reflection",
    "Replan",
    "RunResult",
    "StepResult",
    "VetoCheck",
    "arun_loop",
    "divergence",
    "effect_literals",
    "run_loop",
]
