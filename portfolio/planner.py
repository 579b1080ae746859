"""`Planner`: the long-lived entry point agent runtimes hold on to.

It owns the cascade and its warm workers, so set-up is paid once: translations are cached by task content,
replanning from a changed state re-uses them, and (with a trace store) learned action costs are computed from
the latest stored failure model and handed to the cost-aware delegates. Nothing trains here.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Sequence

from domains.model import GroundAction, State, Task
from portfolio.cascade import CLASSICAL_BUDGET_S, PortfolioDecomposition, Stage, Tier
from portfolio.delegates.fast_downward import FastDownward
from portfolio.delegates.pyperplan import Pyperplan
from portfolio.results import PlanRequest, PlanResult

log = logging.getLogger(__name__)

CLASSICAL_DELEGATES = ("fast-downward", "pyperplan", "typed-search")
DECOMPOSER_DELEGATES = ("llm", "goal-agenda")
DEFAULT_DELEGATES = ("fast-downward", "pyperplan", "goal-agenda")  # with an LLM configured, "llm" before the agenda
CLASSICAL_ONLY = ("fast-downward", "pyperplan")


def make_delegate(name: str, **options: Any):
    """A delegate by its CLI name."""
    if name == "fast-downward":
        return FastDownward(
            alias=options.get("fd_alias") or "lama-first",
            search=options.get("fd_search"),
        )
    if name == "pyperplan":
        return Pyperplan()
    if name == "typed-search":
        from portfolio.delegates.typed_search import TypedSearch

        return TypedSearch()
    if name not in DECOMPOSER_DELEGATES:
        known = ", ".join(CLASSICAL_DELEGATES + DECOMPOSER_DELEGATES)
        raise ValueError(f"unknown delegate {name!r}; expected a comma-separated list of: {known}")
    from portfolio.delegates.registry import make_extra_delegate  # decomposer tier, loaded only when asked for

    return make_extra_delegate(name, **options)


def default_stages(
    names: Sequence[str] = DEFAULT_DELEGATES, budget_s: float = CLASSICAL_BUDGET_S, **options: Any
) -> list[Stage]:
    """Classical delegates share one tier of `budget_s`; decomposers follow in a tier of their own
    (`decomposer_budget_s`, default 30 s) and solve their subgoals with the same classical delegates, so both
    tiers share one translator worker and one translation cache."""
    for name in names:
        if name not in CLASSICAL_DELEGATES + DECOMPOSER_DELEGATES:
            make_delegate(name)  # raises the error that names the known delegates
    classical = [make_delegate(n, **options) for n in names if n in CLASSICAL_DELEGATES]
    stages: list[Stage] = []
    if classical:
        stages.append(Tier("classical", classical, budget_s))
    others = [n for n in names if n not in CLASSICAL_DELEGATES]
    if others:
        from portfolio.delegates.registry import decomposer_tier

        stages.append(decomposer_tier(others, classical_names=[n for n in names if n in CLASSICAL_DELEGATES],
                                      classical_delegates=classical, **options))
    return stages


class Planner:
    """Plan tasks with the cascade; keep workers, translations and learned costs warm between calls.

    `delegates`: stages (`Tier`s or delegates), or delegate names; default: Fast Downward and pyperplan sharing
    `budget_s` (1 s), then the goal-agenda decomposer with 30 s. `Planner(CLASSICAL_ONLY)` stops after 1 s.

    `traces` (a path, default env `PORTFOLIO_TRACES`, or None) enables learned action costs from the latest
    model in that store and records every plan there; `cost_weight` is lambda in
    `cost = base_cost + lambda * -log(1 - p_fail)`. The default 5 prices an action that fails 80% of the time
    (-log 0.2 = 1.6) at about 8 extra unit-cost steps, so a reliable detour of a few steps wins, and the
    optimistic prior's p_fail of ~0.05 adds a uniform 0.26 per step. `explore` prices each grounded action at its
    posterior mean ("mean", the default, picked by the benchmark), a fresh Thompson draw per call ("thompson")
    or an optimistic quantile ("ucb"); see `learning.explore`. `seed` makes the draws repeatable.
    """

    def __init__(
        self,
        delegates: Sequence[Stage] | Sequence[str] | None = None,
        budget_s: float = CLASSICAL_BUDGET_S,
        traces: str | os.PathLike | None = None,
        cost_weight: float = 5.0,
        warm: bool = True,
        explore: str | None = None,
        seed: int | None = None,
    ) -> None:
        from learning.explore import DEFAULT_EXPLORE, check_explore

        self.explore = check_explore(explore or DEFAULT_EXPLORE)
        self.seed = seed
        self._rng = None  # numpy's Generator, made on the first draw
        if delegates is None or all(isinstance(d, str) for d in delegates):
            stages = default_stages(tuple(delegates or DEFAULT_DELEGATES), budget_s=budget_s)  # type: ignore[arg-type]
        else:
            stages = list(delegates)  # type: ignore[arg-type]
        self.cascade = PortfolioDecomposition(stages)
        self.cost_weight = cost_weight
        self.traces_path = Path(traces) if traces else None
        self._store = None
        self._model = None
        self._cost_cache: dict[tuple, dict] = {}
        if self.traces_path is not None:
            self._open_traces()
        if warm:
            for delegate in self._all_delegates():
                if hasattr(delegate, "warm_up"):
                    delegate.warm_up()

    def _all_delegates(self) -> list:
        found = []
        for stage in self.cascade.delegates:
            found.extend(stage.delegates if isinstance(stage, Tier) else [stage])
        return found

    @property
    def model(self):
        """The failure model learned costs come from (`learning.model.FailureModel`), or None."""
        return self._model

    @property
    def fast_downward(self) -> FastDownward | None:
        """The cascade's Fast Downward delegate (its translation cache serves learned costs), if any."""
        return self._fast_downward()

    def _fast_downward(self) -> FastDownward | None:
        return next((d for d in self._all_delegates() if isinstance(d, FastDownward)), None)

    @property
    def store(self):
        """The `traces.store.TraceStore` plans are recorded in, or None without `traces`."""
        return self._store

    # -- learned costs ------------------------------------------------------------------------------------
    def _open_traces(self) -> None:
        from traces.store import TraceStore

        self._store = TraceStore(self.traces_path)
        self.reload_model()

    def reload_model(self) -> None:
        """Load the latest failure model from the trace store (after `portfolio retrain`)."""
        if self._store is None:
            return
        from learning.retrain import load_latest

        self._model = load_latest(self._store)
        self._cost_cache.clear()

    def learned_costs(self, task: Task, init: State | None = None, features: dict | None = None,
                      deadline: float | None = None) -> dict:
        """Grounded action (PDDL form) -> `learning.costs.ActionCost` for every action Fast Downward grounds,
        from the latest model; {} without one. For inspection (`portfolio costs`): planning computes the same
        costs inside the delegates' budget."""
        fast_downward = self._fast_downward()
        if self._model is None or fast_downward is None:
            return {}
        request = PlanRequest(task=task, init=init)
        grounded = fast_downward.grounded_actions(request, deadline or time.monotonic() + 60.0)
        return self._costs_for(task, grounded, features, "mean")

    def _costs_for(self, task: Task, grounded: Sequence[str], features: dict | None, explore: str) -> dict:
        """Costs under `explore`; the model's posteriors are cached per task, situation and grounding list, so
        a Thompson draw per call costs one vectorised sample."""
        from learning.costs import action_posteriors, priced

        key = (task.fingerprint, tuple(sorted((features or {}).items())), len(grounded), hash(tuple(grounded)))
        cached = self._cost_cache.get(key)
        if cached is None:
            from portfolio.results import parse_ground_action

            actions = [parse_ground_action(text) for text in grounded]
            cached = action_posteriors(self._model, task, actions, features=features)
            if len(self._cost_cache) > 256:
                self._cost_cache.clear()
            self._cost_cache[key] = cached
        if explore == "mean":
            costs = self._cost_cache.get((key, "mean"))
            if costs is None:
                costs = self._cost_cache[(key, "mean")] = priced(cached, self.cost_weight)
            return costs
        if self._rng is None:
            import numpy as np

            self._rng = np.random.default_rng(self.seed)
        return priced(cached, self.cost_weight, explore, self._rng)

    # -- planning -----------------------------------------------------------------------------------------
    def plan(
        self,
        task: Task,
        *,
        init: State | None = None,
        excluded: Sequence[GroundAction | str] = (),
        critiques: Sequence[str] = (),
        features: dict | None = None,
        run_id: str | None = None,
        explore: str | None = None,
    ) -> PlanResult:
        """Plan `task` (from `init` when given). With a trace store: learned costs steer the plan (in the
        situation `features` describes, exploring as `explore` says, default the planner's), its predicted
        success probability is reported, and the plan is recorded (under `run_id`, or a new run)."""
        from learning.explore import check_explore

        start = time.monotonic()
        info: dict = {}
        policy = check_explore(explore or self.explore)

        def cost_model(grounded: Sequence[str]) -> dict[str, float]:
            """Called by a delegate once it has grounded the task, inside its own budget."""
            info.update(self._costs_for(task, grounded, features, policy))
            return {name: info[name].cost for name in grounded}

        request = PlanRequest(
            task=task,
            init=init,
            cost_model=cost_model if self._model is not None else None,
            excluded=frozenset(str(a) for a in excluded),
            critiques=tuple(critiques),
        )
        result = self.cascade.solve(request)
        if info and result.solved and all(step in info for step in result.plan):
            from learning.costs import plan_success_probability

            result.success_probability = plan_success_probability(info, result.actions())
        result.elapsed_ms = round((time.monotonic() - start) * 1000, 3)
        if self._store is not None:
            self._record(task, result, run_id)
        return result

    def _record(self, task: Task, result: PlanResult, run_id: str | None) -> None:
        assert self._store is not None
        from domains.pddl_writer import formula_to_pddl

        if run_id is None:
            run_id = self._store.start_run(task.fingerprint, formula_to_pddl(task.problem.goal))
        self._store.record_plan(run_id, result.delegate, [a.model_dump(mode="json") for a in result.attempts],
                                result.elapsed_ms, result.plan)

    def close(self) -> None:
        self.cascade.close()
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> "Planner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
