"""The execute-observe-replan loop: plan, run the next action through its handler, observe, record, decide.

    result = run_loop(planner, task, init, executor, LoopConfig(trigger="progress"), store=store)

Each iteration executes the next step of the current plan and observes the state the handler reports. Then:
- a failure is classified (`portfolio.agent.failures`): *persist* retries it with backoff, *refine* excludes the
  grounded action from later plans of this run and adds a critique, *concede* ends the run;
- the replan trigger decides whether to plan again now: `every-step`, `on-failure`, or `progress` (the mean,
  over the last `window` steps of the current generation, of the share of each step's expected effects that
  were not observed, above `threshold`); a per-action hint overrides it (`always`, `conditional` = follow the
  trigger, `never`); an action raising `ReplanRequested` or a `replan_when` predicate always replans;
- whatever the trigger, a plan whose next step is no longer applicable is replaced (trigger `plan-invalid`);
- a pre-execution `check` may veto a side-effecting action: the plan is discarded and a new one made without it;
- the same grounded action executed in the same state more than `loop_limit` times is a loop: it is excluded;
- a `reflection` (`portfolio.agent.reflection`, off by default) may veto a side-effecting step before it runs
  (like `check`) and may declare an executed step failed after comparing expected and observed effects.
Limits on steps, replans, adaptations and wall time make the agent concede instead of running forever. Every
executed step (retries included) is written to the trace store as it happens; each replan starts a new
adaptation generation. A step that raised `ReplanRequested` is recorded with outcome `replan`.

One loop, two drivers. `_Run.run` is a generator that *yields* what it needs done (plan, execute a step, sleep,
ask a callback) and receives the answer (or the exception, thrown back in), so every decision above is written
once. `run_loop` performs the requests synchronously; `arun_loop` awaits them: coroutine actions run natively on
the event loop, planning and blocking callbacks (the LLM critics) run in worker threads so that many agents
share one event loop and one planner. The indirection costs a generator resume per request (~1 us, measured
against milliseconds of planning).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable, Protocol

from domains.model import Atom, GroundAction, State, Task
from domains.typed_actions import ReplanRequested
from domains.validate import applicable, apply, goal_reached
from portfolio.agent.failures import (
    Category,
    Critic,
    Decision,
    Failure,
    KnowledgeFailure,
    backoff_s,
    classify,
    critique,
    decide,
    describe,
)
from portfolio.agent.observability import COUNTERS, Counters, emit, set_attributes, span

TRIGGERS = ("every-step", "on-failure", "progress")
# Replans that offer the planner the rest of the current plan to keep (`Planner.plan(previous_plan=...)`): the
# ones a schedule or a drift measure asked for. After a failure, a replan request or an invalid plan the world
# has said the plan is wrong, so the planner plans again from scratch.
REUSE_TRIGGERS = ("every-step", "progress", "hint")
VetoCheck = Callable[[GroundAction, State], "bool | str | None"]


@dataclass
class LoopConfig:
    """When to replan and when to give up. `loop_limit`: executions of one action in one state before it is
    a loop; `backoff_s`: first retry delay of a transient failure (doubling)."""

    trigger: str = "on-failure"
    window: int = 5
    threshold: float = 0.3
    max_steps: int = 100
    max_replans: int = 30
    max_adaptations: int = 5
    max_seconds: float = 60.0
    max_retries: int = 2
    backoff_s: float = 0.05
    loop_limit: int = 2

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, got {self.trigger!r}")
        if self.window < 1 or not 0.0 <= self.threshold <= 1.0:
            raise ValueError("window must be >= 1 and threshold within [0, 1]")


@dataclass
class Observation:
    """What a handler reports: the state after the action, its return value, and a replan request from a
    `replan_when` predicate (its reason), if any."""

    state: State
    output: Any = None
    replan_reason: str | None = None


class Executor(Protocol):
    """Runs grounded actions for the loop (the agent provides one per run)."""

    def hint(self, action: GroundAction) -> str: ...

    def side_effects(self, action: GroundAction) -> bool: ...

    def execute(self, action: GroundAction, state: State, expected: State) -> Observation: ...

    def apply_updates(self, state: State, updates: Any) -> State: ...


class Reflection(Protocol):
    """Critics around a step (see `portfolio.agent.reflection.LLMReflection`). `before` returns a reason to veto
    a side-effecting step (None: go ahead); `after` returns a reason to declare an executed step failed."""

    def before(self, step: str, state: list[str], plan: list[str]) -> str | None: ...

    def after(self, step: str, expected: list[str], observed: list[str], output: Any) -> str | None: ...


# -- what the loop asks its driver to do ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    task: Task
    options: dict


@dataclass(frozen=True)
class _Execute:
    step: GroundAction
    state: State
    expected: State


@dataclass(frozen=True)
class _Sleep:
    seconds: float


@dataclass(frozen=True)
class _Ask:
    """Call `fn(*args)`; `blocking` ones (network calls) go to a worker thread under the async driver."""

    fn: Callable[..., Any]
    args: tuple
    blocking: bool = False


@dataclass
class StepResult:
    step: int
    action: str
    outcome: str  # "success" | "failure" | "replan"
    ms: float
    error: str | None = None
    category: str | None = None
    decision: str | None = None
    generation: int = 0
    divergence: float = 0.0
    critique: str | None = None


@dataclass
class Replan:
    trigger: str  # every-step, failure, progress, hint, requested, veto, plan-invalid, loop
    reason: str
    generation: int  # the generation this replan starts
    after_step: int | None
    ms: float
    plan: list[str] = field(default_factory=list)
    status: str = ""


@dataclass
class RunResult:
    status: str  # "success" | "conceded"
    reason: str
    state: State
    output: Any = None
    steps: list[StepResult] = field(default_factory=list)
    replans: list[Replan] = field(default_factory=list)
    plans: list[list[str]] = field(default_factory=list)
    critiques: list[str] = field(default_factory=list)
    run_id: str | None = None
    elapsed_ms: float = 0.0

    @property
    def succeeded(self) -> bool:
        return self.status == "success"


def effect_literals(before: State, after: State) -> list[str]:
    """The changes from `before` to `after` as PDDL literals: additions, then `(not ...)` for deletions."""
    return [str(a) for a in sorted(after - before)] + [f"(not {a})" for a in sorted(before - after)]


def divergence(before: State, expected: State, observed: State) -> tuple[float, list[str], list[str]]:
    """(share of expected effects not observed, expected literals, observed literals)."""
    adds, deletes = expected - before, before - expected
    wanted = len(adds) + len(deletes)
    seen = sum(1 for a in adds if a in observed) + sum(1 for a in deletes if a not in observed)
    return (0.0 if wanted == 0 else 1.0 - seen / wanted), effect_literals(before, expected), effect_literals(
        before, observed)


def _accepts(planner: Any, name: str) -> bool:
    """Whether `planner.plan` takes keyword `name` (runtimes may bring their own planner object)."""
    try:
        parameters = inspect.signature(planner.plan).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


class _Run:
    """The state of one run of the loop; `run_loop` is its only user."""

    def __init__(self, planner: Any, task: Task, init: State, executor: Executor, config: LoopConfig,
                 store: Any, run_id: str | None, features: dict | None, critic: Critic | None,
                 check: VetoCheck | None, counters: Counters | None, reflection: Reflection | None = None) -> None:
        self.planner, self.task, self.executor, self.config = planner, task, executor, config
        self.reflection = reflection
        self.store, self.run_id, self.features, self.critic, self.check = store, run_id, features, critic, check
        self.counters = [c for c in (COUNTERS, counters) if c is not None]
        self.state: State = frozenset(init)
        self.start = time.monotonic()
        self.result = RunResult(status="", reason="", state=self.state, run_id=run_id)
        self.plan: list[GroundAction] | None = None
        self.index = 0
        self.generation = 0
        self.adaptations = 0
        self.divergences: list[float] = []
        self.excluded: list[str] = []
        self.seen: Counter[tuple[State, str]] = Counter()
        self.output: Any = None
        self.cost_model: str | None = None  # of the plan being executed (`PlanResult.cost_model`)
        self.offers_reuse = _accepts(planner, "previous_plan")

    # -- planning ------------------------------------------------------------------------------------------
    def make_plan(self, trigger: str, reason: str) -> Generator[Any, Any, None]:
        initial = trigger == "initial"
        if not initial:
            self.generation += 1
            self.divergences = []
        started = time.monotonic()
        with span("plan" if initial else "replan", trigger=trigger, reason=reason, generation=self.generation) as s:
            options = dict(init=self.state, excluded=list(self.excluded), critiques=list(self.result.critiques),
                           features=self.features, run_id=self.run_id)
            if trigger in REUSE_TRIGGERS and self.plan and self.offers_reuse:
                options.update(previous_plan=[str(a) for a in self.plan[self.index:]],
                               previous_cost_model=self.cost_model)
            result = yield _Plan(self.task, options)
            set_attributes(s, status=result.status.value, delegate=result.delegate, length=len(result.plan))
        ms = round((time.monotonic() - started) * 1000, 3)
        self.plan = result.actions() if result.solved else None
        self.cost_model = getattr(result, "cost_model", None)
        self.index = 0
        self.result.plans.append(list(result.plan))
        after = self.result.steps[-1].step if self.result.steps else None
        if initial:
            emit("plan", status=result.status.value, delegate=result.delegate, ms=ms, plan=" ".join(result.plan))
        else:
            self.result.replans.append(Replan(trigger, reason, self.generation, after, ms, list(result.plan),
                                              result.status.value))
            for counter in self.counters:
                counter.replan(trigger)
            emit("replan", trigger=trigger, reason=reason, generation=self.generation, status=result.status.value,
                 delegate=result.delegate, ms=ms, plan=" ".join(result.plan))
        if self.plan is None:
            why = "; ".join(f"{a.delegate}: {a.status.value} {a.reason}".strip() for a in result.attempts)
            self.no_plan = f"no plan ({result.status.value}{': ' + why if why else ''})"

    def replan(self, trigger: str, reason: str) -> Generator[Any, Any, str | None]:
        """Plan again; a reason to concede when that is not allowed or finds nothing."""
        if len(self.result.replans) >= self.config.max_replans:
            return f"replan limit reached ({self.config.max_replans})"
        yield from self.make_plan(trigger, reason)
        return self.no_plan if self.plan is None else None

    # -- recording -----------------------------------------------------------------------------------------
    def record(self, step: GroundAction, outcome: str, ms: float, expected: list[str], observed: list[str],
               share: float, error: str | None = None, failure: Failure | None = None,
               decision: Decision | None = None) -> None:
        number = len(self.result.steps)
        entry = StepResult(number, str(step), outcome, round(ms, 3), error,
                           failure.category.value if failure else None, decision.value if decision else None,
                           self.generation, round(share, 3), failure.critique if failure else None)
        self.result.steps.append(entry)
        for counter in self.counters:
            counter.step(outcome)
        emit("step", step=number, action=str(step), outcome=outcome, ms=entry.ms, generation=self.generation,
             divergence=entry.divergence, category=entry.category, decision=entry.decision, error=error)
        if self.store is not None and self.run_id is not None:
            from traces.records import StepRecord

            self.store.record_steps([StepRecord(
                run_id=self.run_id, step=number, action=step.name, args=step.args, outcome=outcome,
                error=(failure.critique if failure else error), duration_ms=max(ms, 0.0),
                failure_category=entry.category, features=self.features or {}, expected_effects=expected,
                observed_effects=observed, generation=self.generation,
            )])  # fmt: skip

    # -- one step ------------------------------------------------------------------------------------------
    def execute(self, step: GroundAction) -> Generator[Any, Any, tuple[str | None, str | None]]:
        """Run `step` (with retries); (replan trigger, reason) afterwards, or a concession as ("concede", why)."""
        expected = apply(self.task, self.state, step)
        retries = 0
        while True:
            before = self.state
            started = time.monotonic()
            with span("step", action=str(step), generation=self.generation) as s:
                error: Exception | None = None
                try:
                    observation = yield _Execute(step, before, expected)
                except ReplanRequested as request:
                    ms = (time.monotonic() - started) * 1000
                    self.state = self.executor.apply_updates(before, request.updates)
                    share, exp, obs = divergence(before, expected, self.state)
                    self.record(step, "replan", ms, exp, obs, share, error=f"replan requested: {request.reason}")
                    self.divergences.append(share)
                    set_attributes(s, outcome="replan-requested")
                    return "requested", request.reason
                except Exception as raised:  # noqa: BLE001 - any handler failure is classified, not raised
                    error = raised
                ms = (time.monotonic() - started) * 1000
                if error is None and self.reflection is not None:
                    _, exp, obs = divergence(before, expected, frozenset(observation.state))
                    verdict = yield _Ask(self.reflection.after, (str(step), exp, obs, observation.output), True)
                    if verdict:
                        error = KnowledgeFailure(f"post-step critic: {verdict}",
                                                 side_effects=self.executor.side_effects(step))
                if error is not None:
                    decision, category, outcome = yield from self.failed(step, error, before, expected, retries, ms)
                    set_attributes(s, outcome="failure", category=category.value, decision=decision.value)
                    if decision is Decision.PERSIST:
                        yield _Sleep(backoff_s(retries, self.config.backoff_s))
                        retries += 1
                        continue
                    return outcome
                self.state = frozenset(observation.state)
                self.output = observation.output
                share, exp, obs = divergence(before, expected, self.state)
                self.divergences.append(share)
                self.record(step, "success", ms, exp, obs, share)
                set_attributes(s, outcome="success", divergence=share)
            if observation.replan_reason:
                return "requested", observation.replan_reason
            return self.triggered(step, failed=False, reason="")

    def failed(self, step: GroundAction, error: Exception, before: State, expected: State, retries: int,
               ms: float) -> Generator[Any, Any, tuple[Decision, Category, tuple[str | None, str | None]]]:
        """Classify, critique, record and decide on a failed step; (decision, category, what `execute` returns)."""
        category, side_effects = classify(error)
        failure = Failure(str(step), category, side_effects, describe(error))
        text = yield _Ask(critique, (failure, self.critic))
        failure = Failure(failure.action, category, side_effects, failure.error, text)
        decision = decide(failure, retries, self.config.max_retries, self.adaptations, self.config.max_adaptations)
        share, exp, obs = divergence(before, expected, before)
        self.record(step, "failure", ms, exp, obs, share, describe(error), failure, decision)
        if decision is Decision.PERSIST:
            return decision, category, (None, None)
        self.result.critiques.append(failure.critique)
        if decision is Decision.CONCEDE:
            return decision, category, ("concede", failure.critique)
        self.divergences.append(share)
        self.exclude(step)
        return decision, category, self.triggered(step, failed=True, reason=failure.critique)

    def exclude(self, step: GroundAction) -> None:
        self.adaptations += 1
        if str(step) not in self.excluded:
            self.excluded.append(str(step))

    def triggered(self, step: GroundAction, failed: bool, reason: str) -> tuple[str | None, str | None]:
        """Does the trigger (as overridden by the action's hint) ask for a replan now?"""
        hint = self.executor.hint(step)
        config = self.config
        if hint == "never":
            return None, None
        if hint == "always":
            return "hint", f"{step} has hint 'always'"
        if config.trigger == "every-step":
            return "every-step", f"after {step}"
        if config.trigger == "on-failure" and failed:
            return "failure", reason
        if config.trigger == "progress":
            window = self.divergences[-config.window:]
            mean = sum(window) / len(window) if window else 0.0
            if mean > config.threshold:
                return "progress", (f"mean divergence {mean:.2f} over the last {len(window)} steps > "
                                    f"{config.threshold}")
        return None, None

    # -- the loop ------------------------------------------------------------------------------------------
    def concede(self, reason: str) -> RunResult:
        return self.finish("conceded", reason)

    def finish(self, status: str, reason: str) -> RunResult:
        result = self.result
        result.status, result.reason, result.state, result.output = status, reason, self.state, self.output
        result.elapsed_ms = round((time.monotonic() - self.start) * 1000, 3)
        emit("run", status=status, reason=reason, steps=len(result.steps), replans=len(result.replans),
             ms=result.elapsed_ms)
        return result

    def run(self) -> Generator[Any, Any, RunResult]:
        config = self.config
        self.no_plan = ""
        yield from self.make_plan("initial", "")
        while True:
            if goal_reached(self.task, self.state):
                return self.finish("success", "goal reached")
            if self.plan is None:
                return self.concede(self.no_plan)
            if len(self.result.steps) >= config.max_steps:
                return self.concede(f"step limit reached ({config.max_steps})")
            if time.monotonic() - self.start > config.max_seconds:
                return self.concede(f"time limit reached ({config.max_seconds} s)")
            if self.index >= len(self.plan) or not applicable(self.task, self.state, self.plan[self.index]):
                what = "plan ended" if self.index >= len(self.plan) else f"{self.plan[self.index]} not applicable"
                trigger, reason = "plan-invalid", f"{what} before the goal was reached"
            else:
                trigger, reason = yield from self.next_step()
            if trigger == "concede":
                return self.concede(reason or "")
            if trigger is not None and not goal_reached(self.task, self.state):
                why = yield from self.replan(trigger, reason or "")
                if why is not None:
                    return self.concede(why)

    def next_step(self) -> Generator[Any, Any, tuple[str | None, str | None]]:
        assert self.plan is not None
        step = self.plan[self.index]
        key = (self.state, str(step))
        self.seen[key] += 1
        if self.seen[key] > self.config.loop_limit:
            reason = f"loop: {step} chosen {self.seen[key]} times in the same state"
            self.result.critiques.append(reason)
            if self.adaptations >= self.config.max_adaptations:
                return "concede", reason
            self.exclude(step)
            return "loop", reason
        if self.executor.side_effects(step):
            veto = yield from self.vetoed(step)
            if veto is not None:
                self.result.critiques.append(veto)
                emit("veto", action=str(step), reason=veto)
                if str(step) not in self.excluded:
                    self.excluded.append(str(step))
                return "veto", veto
        self.index += 1
        return (yield from self.execute(step))

    def vetoed(self, step: GroundAction) -> Generator[Any, Any, str | None]:
        """Why `check` or the pre-step critic vetoes `step`, or None."""
        if self.check is not None:
            verdict = yield _Ask(self.check, (step, self.state))
            if verdict is False or isinstance(verdict, str):
                return f"{step} vetoed before execution" + (f": {verdict}" if isinstance(verdict, str) else "")
        if self.reflection is not None:
            assert self.plan is not None
            state = sorted(str(a) for a in self.state)
            rest = [str(a) for a in self.plan[self.index:]]
            reason = yield _Ask(self.reflection.before, (str(step), state, rest), True)
            if reason:
                return f"{step} vetoed by the pre-step critic: {reason}"
        return None


def _resume(loop: Generator[Any, Any, RunResult], answer: Any, error: Exception | None) -> tuple[Any, Any]:
    """Send `answer` (or throw `error`) into the loop: (its next request, None), or (None, the RunResult)."""
    try:
        return (loop.throw(error) if error is not None else loop.send(answer)), None
    except StopIteration as stop:
        return None, stop.value


def run_loop(planner: Any, task: Task, init: Iterable[Atom], executor: Executor, config: LoopConfig | None = None,
             *, store: Any = None, run_id: str | None = None, features: dict | None = None,
             critic: Critic | None = None, check: VetoCheck | None = None,
             counters: Counters | None = None, reflection: Reflection | None = None) -> RunResult:
    """Execute `task` from `init` with `executor` until the goal holds or the loop concedes (see the module
    docstring). `planner` is a `portfolio.planner.Planner` (anything with its `plan` signature); steps are
    written to `store` (a `traces.TraceStore`) under `run_id` when both are given."""
    run = _Run(planner, task, frozenset(init), executor, config or LoopConfig(), store, run_id, features, critic,
               check, counters, reflection)

    def perform(request: Any) -> Any:
        if isinstance(request, _Plan):
            return planner.plan(request.task, **request.options)
        if isinstance(request, _Execute):
            return executor.execute(request.step, request.state, request.expected)
        if isinstance(request, _Sleep):
            return time.sleep(request.seconds)
        if asyncio.iscoroutinefunction(request.fn):  # an async check or critic, outside any event loop
            return asyncio.run(request.fn(*request.args))
        return request.fn(*request.args)

    with span("run", fingerprint=task.fingerprint, run_id=run_id):
        loop = run.run()
        request, done = _resume(loop, None, None)
        while done is None:
            try:
                answer, error = perform(request), None
            except Exception as raised:  # noqa: BLE001 - thrown back into the loop, which decides
                answer, error = None, raised
            request, done = _resume(loop, answer, error)
        return done


async def arun_loop(planner: Any, task: Task, init: Iterable[Atom], executor: Executor,
                    config: LoopConfig | None = None, *, store: Any = None, run_id: str | None = None,
                    features: dict | None = None, critic: Critic | None = None, check: VetoCheck | None = None,
                    counters: Counters | None = None, reflection: Reflection | None = None) -> RunResult:
    """`run_loop` on the event loop: the executor's `aexecute` runs steps (coroutine actions natively), the
    planner's `aplan` (or `plan` in a worker thread) plans, waits are `asyncio.sleep`s, and blocking callbacks
    (LLM critics) run in worker threads. Same decisions, same records."""
    run = _Run(planner, task, frozenset(init), executor, config or LoopConfig(), store, run_id, features, critic,
               check, counters, reflection)
    aplan = getattr(planner, "aplan", None)
    aexecute = getattr(executor, "aexecute", None)

    async def perform(request: Any) -> Any:
        if isinstance(request, _Plan):
            if aplan is not None:
                return await aplan(request.task, **request.options)
            return await asyncio.to_thread(planner.plan, request.task, **request.options)
        if isinstance(request, _Execute):
            if aexecute is not None:
                return await aexecute(request.step, request.state, request.expected)
            return executor.execute(request.step, request.state, request.expected)
        if isinstance(request, _Sleep):
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
            try:
                answer, error = await perform(request), None
            except Exception as raised:  # noqa: BLE001 - thrown back into the loop, which decides
                answer, error = None, raised
            request, done = _resume(loop, answer, error)
        return done


__all__ = ["TRIGGERS", "Executor", "LoopConfig", "Observation", "Reflection", "Replan", "RunResult",
           "StepResult", "arun_loop", "divergence", "effect_literals", "run_loop"]
