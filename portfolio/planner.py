"""`Planner`: the long-lived entry point agent runtimes hold on to.

It owns the cascade and its warm workers, so set-up is paid once: translations are cached by task content,
replanning from a changed state re-uses them, and (with a trace store) learned action costs are computed from
the latest stored failure model and handed to the cost-aware delegates. Nothing trains here.

One planner serves many threads and event loops at once: `await planner.aplan(...)` runs `plan` in a worker
thread. The delegates guard their own warm state (Fast Downward's translation cache and process pools have
locks; the in-process search keeps nothing but a grounding cache); the planner's lock guards what it shares:
the trace store connection (one transaction at a time) and the learned-cost cache and model.

**Plan reuse** (`previous_plan`): `portfolio.plan_reuse`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from domains.ground_text import normalise_actions
from domains.model import Atom, GroundAction, State, Task
from portfolio.cost_cache import check_weight
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.registry import DEFAULT_DELEGATES, build_stages
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import Delegate, PlanRequest, PlanResult, Resource, Status
from portfolio.engine.tiers import Stage, Tier
from portfolio.plan_reuse import REUSE_DELEGATE as REUSE_DELEGATE
from portfolio.plan_reuse import reusable_suffix as reusable_suffix
from portfolio.plan_reuse import reused_plan
from traces.targets import is_url
from traces.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    import numpy as np

    from learning.costs import ActionCost
    from learning.explore import Explore
    from learning.model import FailureModel
    from learning.objective import TimeParams
    from learning.selection import SelectionModel
    from portfolio.cost_explain import CostExplanation
    from traces.store import TraceStore

log = logging.getLogger(__name__)

# rule bindings the explanation of an unsolvable task may enumerate (`domains.explain`): a few hundred ms at most
EXPLAIN_LIMIT = 50_000
TASK_COSTS = "task"  # `PlanResult.cost_model` without learned costs: the task's own action costs


class Planner(Resource):
    """Plan tasks with the cascade; keep workers, translations and learned costs warm between calls.

    `delegates`: stages (`Tier`s or delegates), or delegate names; default: Fast Downward and pyperplan sharing
    `budget_s` (1 s, split 4:1), then the goal-agenda decomposer with 30 s. `Planner(CLASSICAL_ONLY)` stops after
    1 s. `budget_s` applies to a cascade built from names; given stages, it is an error (they carry their own).
    The planner owns the stages it is given and closes them (also when its own set-up fails).

    `traces` (a path, default env `PORTFOLIO_TRACES`, or None) enables learned action costs from the latest
    model in that store and records every plan there; `cost_weight` is lambda in
    `cost = base_cost + lambda * -log(1 - p_fail)`. The default 5 prices an action that fails 80% of the time
    (-log 0.2 = 1.6) at about 8 extra unit-cost steps, so a reliable detour of a few steps wins, and the
    optimistic prior's p_fail of ~0.05 adds a uniform 0.26 per step. `tenant` (default "default", whose runs the CLI
    and the Python API record) chooses whose model that is (`traces.tenants`: the service keeps one per tenant of
    its API keys; "*" is the model pooled over them all). `explore` prices each grounded action at its
    posterior mean, plus one posterior standard deviation for one already tried ("cautious", the default, picked
    by the benchmark: the optimizer's curse, `learning.explore`; a plan with a step believed to fail more often
    than not is planned once more under a Thompson draw, so such a call runs the cascade twice and may take up to
    twice its budget), a fresh Thompson draw per call ("thompson")
    or an optimistic quantile ("optimistic"); the old names "mean" and "ucb" still work, with a warning. `seed`
    makes the draws repeatable.

    With a trace store, runs are recorded with their domain's fingerprint, and the latest selection model in
    the store (`portfolio retrain`, `learning.selection`) chooses which Fast Downward configurations race on a
    task of a domain it has records of (the fixed order otherwise), and with which translator flags the task is
    translated (the driver's defaults unless records show a variant faster); `select=False` keeps both fixed. A
    stored selection this release cannot read (hand-edited, damaged) is passed over with a warning naming its
    row: the fixed order plans until the next `portfolio retrain` replaces it.

    `carry_over` (default True): Fast Downward's translation and searches go on past its share of the classical
    tier, beside the later delegates, until the cascade's final deadline; the first valid plan wins
    (`portfolio.engine.cascade`, "Carry-over"). False: they are killed when its share ends.

    `eliminate_steps` (default True): the steps of the winning plan that no goal needs are removed after
    validation (`domains.action_elimination`; `PlanResult.eliminated_steps` says how many).

    `quality` (default "anytime"): with costs (learned or the task's own), how Fast Downward trades plan cost
    for time: "anytime" returns the cheapest plan found once optimality is proved (A* races on small tasks) or a
    quarter of its time has passed with a plan in hand, "optimal" waits for the proof, "first" returns the first
    cost-aware plan (`portfolio.delegates.fast_downward.anytime`). Per call: `plan(quality=...)`.

    `objective` (default "risk", the cost above): "time" prices each step by its expected milliseconds to
    success, retries of transient failures and replans included, from the durations learned with the model
    (`learning.objective`; `time` sets the retry limit, replan penalty and side-effect weight). Per call:
    `plan(objective=...)`.

    `record_errors` (default "raise"): what a plan whose recording in the trace store fails (a full disk, a
    read-only or damaged file) does: "raise" raises the store's error; "log" returns the plan, logs the failure
    (once, until a recording succeeds again) and counts it in `record_failures` (`last_record_error` says why):
    planning itself needs no disk (the service's workers, for plans the client gave no run id).
    """

    def __init__(
        self,
        delegates: Sequence[Stage] | Sequence[str] | None = None,
        budget_s: float | None = None,
        traces: str | os.PathLike[str] | None = None,
        cost_weight: float = 5.0,
        warm: bool = True,
        explore: str | None = None,
        seed: int | None = None,
        select: bool = True,
        carry_over: bool = True,
        eliminate_steps: bool = True,
        quality: str | None = None,
        load_model: bool = True,
        objective: str | None = None,
        time: TimeParams | None = None,
        tenant: str | None = None,
        record_errors: Literal["raise", "log"] = "raise",
    ) -> None:
        from learning.explore import DEFAULT_EXPLORE, check_explore
        from learning.objective import DEFAULT_OBJECTIVE, TimeParams, check_objective
        from portfolio.delegates.fast_downward.searches import DEFAULT_QUALITY, check_quality

        self.explore = check_explore(explore or DEFAULT_EXPLORE)
        self.objective = check_objective(objective or DEFAULT_OBJECTIVE)
        self.time = time or TimeParams()
        self.quality = check_quality(quality or DEFAULT_QUALITY)
        self.seed = seed
        self._rng: np.random.Generator | None = None  # made on the first draw
        if delegates is None or all(isinstance(d, str) for d in delegates):
            stages = build_stages(tuple(delegates or DEFAULT_DELEGATES), budget_s)  # type: ignore[arg-type]
        elif budget_s is not None:
            # refused rather than ignored: stages carry their own budgets
            raise ValueError(
                "budget_s sets the classical tier of the cascade built from delegate names; the "
                "stages given carry their own budgets (Tier(name, delegates, budget_s))"
            )
        else:
            stages = list(delegates)  # type: ignore[arg-type]
        # The planner owns the stages from here on: if the rest of set-up fails (a bad trace store), it closes
        # them, so no worker process or temporary directory outlives a failed constructor.
        self.cascade = PortfolioDecomposition(stages, carry_over=carry_over, eliminate_steps=eliminate_steps)
        self.cost_weight = check_weight(cost_weight)
        # a PostgreSQL URL stays text: Path() would fold its "//"
        self.traces_path: Path | str | None = (str(traces) if is_url(str(traces)) else Path(traces)) if traces else None
        # False: the caller loads the model itself (`reload_model`), and decides what a bad one means (the
        # service's worker keeps serving and reports it, rather than dying at start in a loop).
        self._load_model_at_start = load_model
        self.tenant = tenant or DEFAULT_TENANT
        self._store: TraceStore | None = None
        self._model: FailureModel | None = None
        self.select = select
        self._selection: SelectionModel | None = None
        self._selection_error: str | None = None  # why the stored selection is passed over (warned once)
        if record_errors not in ("raise", "log"):
            raise ValueError(f"record_errors must be 'raise' or 'log', got {record_errors!r}")
        self.record_errors = record_errors
        self.record_failures = 0
        self.last_record_error: Exception | None = None  # None again once a recording succeeds
        # task key -> `learning.costs.Posteriors`; (task key, "cautious", lambda) -> their cautious costs
        self._cost_cache: dict[tuple[Any, ...], Any] = {}
        self._model_generation = 0  # bumped on every model (re)load: plans made under another one are not reused
        self._lock = threading.RLock()  # store writes, cost cache, model (see the module docstring)
        self._warm = False  # the delegates are warmed: a selection model loaded from then on is warmed too
        try:
            if self.traces_path is not None:
                self._open_traces()
            if warm:
                for delegate in self._all_delegates():
                    delegate.warm_up()
                self._warm = True
                self._prestart_selectable()
        except BaseException:
            self.close()
            raise

    def _all_delegates(self) -> list[Delegate]:
        found: list[Delegate] = []
        for stage in self.cascade.delegates:
            found.extend(stage.delegates if isinstance(stage, Tier) else [stage])
        return found

    @property
    def model(self) -> FailureModel | None:
        """The failure model learned costs come from (`learning.model.FailureModel`), or None."""
        return self._model

    @property
    def selection(self) -> SelectionModel | None:
        """The configuration selection model (`learning.selection.SelectionModel`) in use, or None."""
        return self._selection

    @property
    def fast_downward(self) -> FastDownward | None:
        """The cascade's Fast Downward delegate (its translation cache serves learned costs), if any."""
        return self._fast_downward()

    def _fast_downward(self) -> FastDownward | None:
        return next((d for d in self._all_delegates() if isinstance(d, FastDownward)), None)

    @property
    def store(self) -> TraceStore | None:
        """The `traces.store.TraceStore` plans are recorded in, or None without `traces`."""
        return self._store

    # -- learned costs ------------------------------------------------------------------------------------
    def _open_traces(self) -> None:
        from traces.store import TraceStore

        self._store = TraceStore(self.traces_path)
        if self._load_model_at_start:
            self.reload_model()

    def reload_model(self) -> None:
        """Load the latest failure model of the planner's `tenant` and the selection model from the trace store
        (after `portfolio retrain`)."""
        if self._store is None:
            return
        from learning.retrain import load_latest

        self.use_model(load_latest(self._store, self.tenant))
        self._load_selection()

    def reload_selection(self) -> None:
        """Load the latest selection model from the trace store (`reload_model` without the failure model)."""
        self._load_selection()

    def use_model(self, model: FailureModel | None, generation: int | None = None) -> None:
        """Price actions with `model` from now on (None: the task's own costs), for a caller that keeps several
        (the service's workers keep one per tenant, `portfolio.serve.tenant_models`). `generation` names it in
        `PlanResult.cost_model` (its stored version, say), so that a replan reuses a plan only if it was made
        under the same model; None: the next of the planner's own count. Nothing changes if `model` is in use."""
        with self._lock:
            if model is self._model and model is not None:
                return
            self._model = model
            self._cost_cache = {}
            self._model_generation = generation if generation is not None else self._model_generation + 1

    def _load_selection(self) -> None:
        """Load the latest selection model, which every request then carries to Fast Downward
        (`PlanRequest.selection`: its race order and translator flags; none: the fixed order and the driver's
        default translation; also when the stored one cannot be read, which a retrain replaces: warned once, not
        a failure of every plan and retrain)."""
        fast_downward = self._fast_downward()
        if self._store is None or fast_downward is None or not self.select:
            return
        from learning.selection import load_selection
        from traces.errors import BadRowError

        try:
            model = load_selection(self._store)
            self._selection_error = None
        except BadRowError as error:
            if str(error) != self._selection_error:
                log.warning("%s Fast Downward races its fixed order until `portfolio retrain` replaces it.", error)
            self._selection_error, model = str(error), None
        self._selection = model
        self._prestart_selectable()

    def _prestart_selectable(self) -> None:
        """With a selection model on a warmed planner, start a search process for each configuration it may
        choose (`FastDownward.prestart_selectable`): at construction, and whenever a selection is loaded later
        (the service loads it after making its planner, a retrain may give the first one)."""
        fast_downward = self._fast_downward()
        if self._warm and fast_downward is not None and self._selection is not None:
            fast_downward.prestart_selectable()  # any configuration may be chosen

    def cost_model_for(
        self, explore: str, features: dict[str, Any] | None, weight: float | None = None, objective: str | None = None
    ) -> str | None:
        """Which costs a call makes plans under: "task", or "learned:<generation>:<policy>:<situation>" (plus
        ":w<weight>" when the call's weight is not the planner's, ":time" under the time objective, which has no
        weight) with a failure model; None when no two calls share them (Thompson sampling draws fresh costs)."""
        if self._model is None:
            return TASK_COSTS
        if explore == "thompson":
            return None
        return self._learned_name(explore, features, weight, objective)

    def _learned_name(
        self, explore: str, features: dict[str, Any] | None, weight: float | None, objective: str | None
    ) -> str:
        """The learned costs' name: "learned:<generation>:<policy>:<situation>", as `cost_model_for` gives it."""
        situation = hashlib.sha256(repr(sorted((features or {}).items())).encode()).hexdigest()[:12]
        name = f"learned:{self._model_generation}:{explore}:{situation}"
        if (objective or self.objective) == "time":
            return f"{name}:time"
        return name if weight is None or weight == self.cost_weight else f"{name}:w{weight:g}"

    def learned_costs(
        self,
        task: Task,
        init: Iterable[Atom | str] | None = None,
        features: dict[str, Any] | None = None,
        deadline: float | None = None,
        weight: float | None = None,
        objective: str | None = None,
    ) -> dict[str, ActionCost]:
        """Grounded action (PDDL form) -> `learning.costs.ActionCost` for every action Fast Downward grounds,
        from the latest model, priced under the planner's explore policy, with the evidence and the 90% interval
        of each p_fail (`learning.costs.describe`); {} without a model. For inspection (`portfolio costs`):
        planning computes the same costs inside the delegates' budget. `objective` (default the planner's):
        "time" adds `expected_ms`."""
        from portfolio.engine.arguments import check_state, check_task

        task = check_task(task)  # a unified-planning Problem becomes a Task here
        init = check_state(task, init)
        fast_downward = self._fast_downward()
        if self._model is None or fast_downward is None:
            return {}
        request = PlanRequest(task=task, init=init, selection=self._selection)  # its translator flags: plan's
        grounded = fast_downward.grounded_actions(request, deadline or time.monotonic() + 60.0)
        from learning.costs import describe

        costs = self._costs_for(task, grounded, features, self.explore, weight, objective)
        return describe(costs, self._model, features)

    def _costs_for(
        self,
        task: Task,
        grounded: Sequence[str],
        features: dict[str, Any] | None,
        explore: Explore,
        weight: float | None = None,
        objective: str | None = None,
    ) -> dict[str, ActionCost]:
        """Costs under `explore`, `weight` (lambda; None: the planner's `cost_weight`) and `objective` (None:
        the planner's); the model's posteriors are cached per task, situation, grounding list and objective, so
        a Thompson draw per call costs one vectorised sample."""
        from learning.objective import check_objective
        from portfolio.cost_cache import cached_costs

        lam = self.cost_weight if weight is None else check_weight(weight)
        objective = check_objective(objective or self.objective)
        time = self.time if objective == "time" else None
        with self._lock:
            return cached_costs(
                self._cost_cache, self._model, task, grounded, features, explore, lam, objective, time, self._draws
            )

    def _draws(self) -> np.random.Generator:
        """The generator of exploration draws, made on the first one (from `seed`)."""
        if self._rng is None:
            import numpy as np

            self._rng = np.random.default_rng(self.seed)
        return self._rng

    # -- planning -----------------------------------------------------------------------------------------
    def plan(
        self,
        task: Task,
        *,
        init: Iterable[Atom | str] | None = None,
        excluded: Sequence[GroundAction | str] = (),
        critiques: Sequence[str] = (),
        features: dict[str, Any] | None = None,
        run_id: str | None = None,
        explore: str | None = None,
        previous_plan: Sequence[GroundAction | str] = (),
        previous_cost_model: str | None = None,
        quality: str | None = None,
        weight: float | None = None,
        objective: str | None = None,
    ) -> PlanResult:
        """Plan `task` (a `Task`, or a unified-planning `Problem`, converted with `domains.up_bridge.task_from_up`:
        the plan's steps are PDDL text either way; `portfolio.up` gives UP's own plans) from `init` when given
        (Atoms or atoms spelled as in plans, `"(on b a)"`, in any iterable; `task.init` is the default; anything
        else is a `TypeError`, before any delegate runs). With a trace store: learned costs steer the plan (in the
        situation `features` describes, exploring as `explore` says, default the planner's), its predicted
        success probability is reported, and the plan is recorded (under `run_id`, or a new run).

        `previous_plan`: the steps of the current plan not executed yet; when they (or a later suffix) are still
        valid from `init`, avoid `excluded`, and `previous_cost_model` (the `cost_model` of the result they came
        from; None: the caller vouches) is this call's, they are returned as `delegate: "plan-reuse"` without
        planning (module docstring). `quality`, `weight` (lambda of the learned costs) and `objective` ("risk"
        or "time") override the planner's for this call."""
        from learning.explore import check_explore, explore_again
        from learning.objective import check_objective
        from portfolio.delegates.fast_downward.searches import check_quality
        from portfolio.engine.arguments import check_actions, check_excluded, check_state, check_task

        start = time.monotonic()
        task = check_task(task)  # a wrong type fails here, never inside a delegate; a UP Problem is converted
        init = check_state(task, init)
        excluded, previous_plan = check_actions("excluded", excluded), check_actions("previous_plan", previous_plan)
        check_excluded(task, excluded)
        policy = check_explore(explore or self.explore)
        quality = check_quality(quality or self.quality)
        if weight is not None:
            check_weight(weight)
        objective = check_objective(objective or self.objective)
        cost_model_name = self.cost_model_for(policy, features, weight, objective)
        reused = reused_plan(task, init, previous_plan, excluded, previous_cost_model, cost_model_name, start)
        if reused is not None:
            if self._store is not None:
                self._record(task, reused, run_id)
            return reused

        def solve(policy: Explore) -> PlanResult:
            return self._solve(task, init, excluded, critiques, policy, features, weight, objective, quality)

        result = solve(policy)
        costs = result._planned_costs or {}
        p_fail = [costs[step].p_fail for step in result.plan if step in costs]
        # not after quality "first": its plan need not be the cheapest under the costs, and it was asked for speed
        again = explore_again(policy, p_fail) if quality != "first" else None
        if again is not None:  # a step more likely to fail than not: try what might be better
            explored = solve(again)
            if explored.solved:
                log.debug("a step of the plan is more likely to fail than not: planned again under %s", again)
                explored.attempts = result.attempts + explored.attempts
                # named for the draw it was made under; no later call's costs are the same, so none reuses it
                result, cost_model_name = explored, self._learned_name(again, features, weight, objective)
        if result.status is Status.UNSOLVABLE:
            from domains.explain import explain_unreachable

            result.explanation = explain_unreachable(task, init, limit=EXPLAIN_LIMIT)
        result.elapsed_ms = round((time.monotonic() - start) * 1000, 3)
        result.cost_model = cost_model_name
        if self._store is not None:
            self._record(task, result, run_id)
        return result

    def _solve(
        self,
        task: Task,
        init: State | None,
        excluded: Sequence[GroundAction | str],
        critiques: Sequence[str],
        policy: Explore,
        features: dict[str, Any] | None,
        weight: float | None,
        objective: str,
        quality: str,
    ) -> PlanResult:
        """One run of the cascade with the learned costs priced under `policy` (the task's own without a model),
        the result's success probability and learned cost filled in under the posterior means."""
        info: dict[str, ActionCost] = {}

        def cost_model(grounded: Sequence[str]) -> dict[str, float]:
            """Called by a delegate once it has grounded the task, inside its own budget. An action keeps the
            cost it was first priced at in this call: under Thompson sampling every delegate and subgoal of one
            call plans with one draw, the one `info` keeps for the result."""
            priced = self._costs_for(task, grounded, features, policy, weight, objective)
            with self._lock:  # delegates carried over price on threads of their own
                for name, cost in priced.items():
                    info.setdefault(name, cost)
                return {name: info[name].cost for name in grounded}

        request = PlanRequest(
            task=task,
            init=init,
            cost_function=cost_model if self._model is not None else None,
            excluded=normalise_actions(excluded),
            critiques=tuple(critiques),
            quality=quality,
            selection=self._selection,
        )
        result = self.cascade.solve(request)
        if info:
            result._planned_costs = dict(info)  # what `explain` prices the base-cost plan with
        if info and result.solved:
            from learning.costs import plan_price

            price = plan_price(info, result.plan)
            if price is not None:
                result.success_probability = price.success_probability
                result.learned_cost = price.cost
        return result

    def plan_base_costs(self, task: Task, *, init: Iterable[Atom | str] | None = None) -> PlanResult:
        """Plan `task` from `init` under its own action costs, whatever the trace store has learned: the cascade
        and budgets of `plan`, the plan validated like any other, but not recorded and never reused (what
        `explain` compares a learned plan with)."""
        from portfolio.engine.arguments import check_state, check_task

        start = time.monotonic()
        task = check_task(task)
        init = check_state(task, init)
        result = self.cascade.solve(PlanRequest(task=task, init=init, quality=self.quality, selection=self._selection))
        result.elapsed_ms = round((time.monotonic() - start) * 1000, 3)
        result.cost_model = TASK_COSTS
        return result

    def explain(
        self,
        task: Task,
        result: PlanResult,
        *,
        init: Iterable[Atom | str] | None = None,
        features: dict[str, Any] | None = None,
        weight: float | None = None,
        objective: str | None = None,
    ) -> CostExplanation:
        """What learned costs changed in `result`, a plan this planner made for `task` (pass the `init`, `features`,
        `weight` and `objective` of that call, so the evidence is the one that priced it): `task` planned again
        under its own costs (`plan_base_costs`), and the evidence against each step of that plan `result` avoided
        (`portfolio.cost_explain.explain_learned_plan`). The base-cost plan is priced with the costs `result` was
        planned with, which `plan` keeps on it (a Thompson draw is not drawn again); a result without them (a
        reused plan) is priced again under the planner's policy. Without a model, or for a `result` made under the
        task's own costs, the explanation says there is nothing learned to explain; no second plan is made."""
        from portfolio.cost_explain import NO_LEARNED_PLAN, NOTHING_LEARNED, CostExplanation, explain_learned_plan

        if self._model is None or result.cost_model == TASK_COSTS:
            return CostExplanation(learned=False, note=NOTHING_LEARNED)
        if not result.solved:
            return CostExplanation(learned=True, note=NO_LEARNED_PLAN)
        base = self.plan_base_costs(task, init=init)
        planned = result._planned_costs
        if planned is None:  # no costs kept (a reused plan): priced again
            costs = self.learned_costs(task, init=init, features=features, weight=weight, objective=objective)
        else:
            from learning.costs import describe

            costs = describe({step: planned[step] for step in base.plan if step in planned}, self._model, features)
        return explain_learned_plan(result, base, costs)

    async def aplan(self, task: Task, **options: Any) -> PlanResult:
        """`plan(task, **options)` off the event loop (in a worker thread), for async runtimes; safe to await
        from many tasks at once (module docstring)."""
        import asyncio  # here: a plan from the CLI or a thread pays no asyncio import (nor its ssl)

        return await asyncio.to_thread(self.plan, task, **options)

    def _record(self, task: Task, result: PlanResult, run_id: str | None) -> None:
        """Record `result` (under `run_id`, or a new run); a failure as `record_errors` says."""
        assert self._store is not None
        from domains.pddl_writer import formula_to_pddl
        from traces.errors import TraceStoreError

        with self._lock:  # one connection: transactions of concurrent callers must not interleave
            try:
                if run_id is None:
                    run_id = self._store.start_run(
                        task.fingerprint, formula_to_pddl(task.problem.goal), domain=task.domain_fingerprint
                    )
                self._store.record_plan(
                    run_id,
                    result.delegate,
                    [a.model_dump(mode="json") for a in result.attempts],
                    result.elapsed_ms,
                    result.plan,
                )
            except TraceStoreError as error:
                if self.record_errors == "raise":
                    raise
                if self.last_record_error is None:
                    log.warning("plans are not recorded in the trace store (%s); planning goes on", error)
                self.record_failures += 1
                self.last_record_error = error
                return
            if self.last_record_error is not None:
                log.warning("plans are recorded in the trace store again")
                self.last_record_error = None

    def close(self) -> None:
        self.cascade.close()
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Planner:
        return self
