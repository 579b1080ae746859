"""One run of the execute-observe-replan loop, written once as a generator (see `portfolio.agent.loop`).

`LoopRun.run` yields what it needs done (`Plan`, `Execute` a step, `Sleep`, `Ask` a callback) and receives the
answer, or the exception thrown back in; every decision the loop makes (failure handling, triggers, hints,
vetoes, loops, limits) is here, and nothing that blocks. The drivers in `portfolio.agent.loop` perform the
requests, synchronously (`run_loop`) or on an event loop (`arun_loop`); a driver-specific decision here would be
a decision made twice.
"""

from __future__ import annotations

import inspect
import time
from collections import Counter
from collections.abc import Generator, Iterable
from dataclasses import replace
from typing import Any, Literal

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
from portfolio.agent.give_up import give_up_reason
from portfolio.agent.loop_requests import Ask, Execute, Plan, Sleep
from portfolio.agent.loop_types import (
    Executor,
    LoopConfig,
    Reflection,
    Replan,
    RunResult,
    StepResult,
    VetoCheck,
    divergence,
)
from portfolio.agent.observability import COUNTERS, Counters, emit, set_attributes, span

# Replans that offer the planner the rest of the current plan to keep (`Planner.plan(previous_plan=...)`): the
# ones a schedule or a drift measure asked for. After a failure, a replan request or an invalid plan the world
# has said the plan is wrong, so the planner plans again from scratch.
REUSE_TRIGGERS = ("every-step", "progress", "hint")


def _accepts(planner: Any, name: str) -> bool:
    """Whether `planner.plan` takes keyword `name` (runtimes may bring their own planner object)."""
    try:
        parameters = inspect.signature(planner.plan).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


class LoopRun:
    """The state of one run of the loop; the drivers (`run_loop`, `arun_loop`) are its only users."""

    def __init__(
        self,
        planner: Any,
        task: Task,
        init: Iterable[Atom],
        executor: Executor,
        config: LoopConfig | None,
        store: Any,
        run_id: str | None,
        features: dict | None,
        critic: Critic | None,
        check: VetoCheck | None,
        counters: Counters | None,
        reflection: Reflection | None = None,
    ) -> None:
        self.planner, self.task, self.executor, self.config = planner, task, executor, config or LoopConfig()
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
            options = dict(
                init=self.state,
                excluded=list(self.excluded),
                critiques=list(self.result.critiques),
                features=self.features,
                run_id=self.run_id,
            )
            if trigger in REUSE_TRIGGERS and self.plan and self.offers_reuse:
                options.update(
                    previous_plan=[str(a) for a in self.plan[self.index :]], previous_cost_model=self.cost_model
                )
            result = yield Plan(self.task, options)
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
            self.result.replans.append(
                Replan(trigger, reason, self.generation, after, ms, list(result.plan), result.status.value)
            )
            for counter in self.counters:
                counter.replan(trigger)
            emit(
                "replan",
                trigger=trigger,
                reason=reason,
                generation=self.generation,
                status=result.status.value,
                delegate=result.delegate,
                ms=ms,
                plan=" ".join(result.plan),
            )
        if self.plan is None:
            why = "; ".join(f"{a.delegate}: {a.status.value} {a.reason}".strip() for a in result.attempts)
            said = f"{result.status.value}{': ' + why if why else ''}"
            # the cause in a person's words when it can be named (`give_up`), the planner's words after it
            cause = give_up_reason(self.task, self.state, self.excluded, self.result.steps)
            self.no_plan = f"no plan: {cause} (planner: {said})" if cause else f"no plan ({said})"

    def replan(self, trigger: str, reason: str) -> Generator[Any, Any, str | None]:
        """Plan again; a reason to concede when that is not allowed or finds nothing."""
        if len(self.result.replans) >= self.config.max_replans:
            return f"replan limit reached ({self.config.max_replans})"
        yield from self.make_plan(trigger, reason)
        return self.no_plan if self.plan is None else None

    # -- recording -----------------------------------------------------------------------------------------
    def record(
        self,
        step: GroundAction,
        outcome: Literal["success", "failure", "replan"],
        ms: float,
        expected: list[str],
        observed: list[str],
        share: float,
        error: str | None = None,
        failure: Failure | None = None,
        decision: Decision | None = None,
    ) -> None:
        number = len(self.result.steps)
        entry = StepResult(
            number,
            str(step),
            outcome,
            round(ms, 3),
            error,
            failure.category.value if failure else None,
            decision.value if decision else None,
            self.generation,
            round(share, 3),
            failure.critique if failure else None,
        )
        self.result.steps.append(entry)
        for counter in self.counters:
            counter.step(outcome)
        emit(
            "step",
            step=number,
            action=str(step),
            outcome=outcome,
            ms=entry.ms,
            generation=self.generation,
            divergence=entry.divergence,
            category=entry.category,
            decision=entry.decision,
            error=error,
        )
        if self.store is not None and self.run_id is not None:
            from traces.records import StepRecord

            self.store.record_steps([StepRecord(
                run_id=self.run_id, step=number, action=step.name, args=step.args, outcome=outcome,
                error=(failure.critique if failure else error), duration_ms=max(ms, 0.0),
                failure_category=entry.category, side_effects=failure.side_effects if failure else None,
                features=self.features or {}, expected_effects=expected,
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
                    observation = yield Execute(step, before, expected)
                except ReplanRequested as request:
                    ms = (time.monotonic() - started) * 1000
                    self.state = self.executor.apply_updates(before, request.updates)
                    share, exp, obs = divergence(before, expected, self.state)
                    self.record(step, "replan", ms, exp, obs, share, error=f"replan requested: {request.reason}")
                    self.divergences.append(share)
                    set_attributes(s, outcome="replan-requested")
                    return "requested", request.reason
                except Exception as raised:
                    error = raised
                ms = (time.monotonic() - started) * 1000
                if error is None and self.reflection is not None:
                    _, exp, obs = divergence(before, expected, frozenset(observation.state))
                    verdict = yield Ask(self.reflection.after, (str(step), exp, obs, observation.output), True)
                    if verdict:
                        error = KnowledgeFailure(
                            f"post-step critic: {verdict}", side_effects=self.executor.side_effects(step)
                        )
                if error is not None:
                    decision, category, outcome = yield from self.failed(step, error, before, expected, retries, ms)
                    set_attributes(s, outcome="failure", category=category.value, decision=decision.value)
                    if decision is Decision.PERSIST:
                        yield Sleep(backoff_s(retries, self.config.backoff_s))
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

    def failed(
        self, step: GroundAction, error: Exception, before: State, expected: State, retries: int, ms: float
    ) -> Generator[Any, Any, tuple[Decision, Category, tuple[str | None, str | None]]]:
        """Classify, critique, record and decide on a failed step; (decision, category, what `execute` returns)."""
        category, side_effects = classify(error)
        failure = Failure(str(step), category, side_effects, describe(error))
        # decided before the critique, so that the critique says what the loop does next (a retry is not
        # "another way"); the decision depends on the category alone
        decision = decide(failure, retries, self.config.max_retries, self.adaptations, self.config.max_adaptations)
        failure = replace(failure, decision=decision, retry=retries)
        text = yield Ask(critique, (failure, self.critic))
        failure = replace(failure, critique=text)
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
            window = self.divergences[-config.window :]
            mean = sum(window) / len(window) if window else 0.0
            if mean > config.threshold:
                return "progress", (
                    f"mean divergence {mean:.2f} over the last {len(window)} steps > {config.threshold}"
                )
        return None, None

    # -- the loop ------------------------------------------------------------------------------------------
    def concede(self, reason: str) -> RunResult:
        return self.finish("conceded", reason)

    def finish(self, status: str, reason: str) -> RunResult:
        result = self.result
        result.status, result.reason, result.state, result.output = status, reason, self.state, self.output
        result.elapsed_ms = round((time.monotonic() - self.start) * 1000, 3)
        emit(
            "run",
            status=status,
            reason=reason,
            steps=len(result.steps),
            replans=len(result.replans),
            ms=result.elapsed_ms,
        )
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
            trigger: str | None
            reason: str | None
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
            verdict = yield Ask(self.check, (step, self.state))
            if verdict is False or isinstance(verdict, str):
                return f"{step} vetoed before execution" + (f": {verdict}" if isinstance(verdict, str) else "")
        if self.reflection is not None:
            assert self.plan is not None
            state = sorted(str(a) for a in self.state)
            rest = [str(a) for a in self.plan[self.index :]]
            reason = yield Ask(self.reflection.before, (str(step), state, rest), True)
            if reason:
                return f"{step} vetoed by the pre-step critic: {reason}"
        return None
