"""Learned action costs for the planners: base cost plus the price of the risk of failing.

    cost(a) = base_cost(a) + lam * -log(1 - p_fail(a))          (objective `risk`, the default)
    cost(a) = expected_ms(a) / 1000                               (objective `time`, `learning.objective`)

Since -log(1 - p) summed over a plan is -log of the plan's probability that every step succeeds, with base costs
0 (or lam large) the cheapest plan is the most likely to succeed: the determinization of FF-Replan and its
family. With base costs the planner trades plan cost against risk, `lam` setting the rate (cost units per nat).

Nothing here trains: `action_posteriors` calls `FailureModel.predict_posterior` once for all actions (cache it
per task and situation), and `priced` turns posteriors into costs under an exploration policy
(`learning.explore`): p_fail reported is always the posterior mean, the cost is priced at the policy's p_fail
(the mean plus `PESSIMISM` posterior standard deviations, a Thompson draw fresh per call, or an optimistic
quantile).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from domains.ground_text import ground_action_text
from domains.model import GroundAction, Task, action_cost
from learning.durations import DEFAULT_MS, TimeEstimate, TimeModel
from learning.explore import DEFAULT_EXPLORE, Explore, explore_p_fail
from learning.model import Evidence, FailureModel
from learning.objective import Objective, TimeParams, check_objective, expected_ms, split_retries

# p_fail is clipped below 1 so that a cost is always finite: "very risky" must still be plannable when it is
# the only way to the goal.
MAX_P_FAIL = 1.0 - 1e-6


@dataclass(frozen=True)
class ActionCost:
    """What one grounded action costs: `base_cost` (the task's), `p_fail` (the posterior mean), `cost` (what
    planning uses); `expected_ms` only under the `time` objective (`learning.objective`). `charge`: what the
    explore policy added to the cost at the mean (`learning.explore`; a Thompson draw's may be negative).
    `interval` (a 90% credible interval of p_fail) and `evidence` (what the estimate rests on) are filled in
    for inspection (`describe`), not while planning."""

    base_cost: float
    p_fail: float
    cost: float
    expected_ms: float | None = None
    charge: float = 0.0
    interval: tuple[float, float] | None = None
    evidence: Evidence | None = None
    concentration: float | None = None  # the posterior's pseudo-steps: the interval's width


def risk_cost(p_fail: float, lam: float = 1.0) -> float:
    """lam * -log(1 - p_fail): 0 for a sure action, growing without bound as p_fail -> 1."""
    return lam * -math.log1p(-min(max(p_fail, 0.0), MAX_P_FAIL))


@dataclass(frozen=True)
class Posteriors:
    """Per grounded action (PDDL form, in order): base cost, posterior mean p_fail and concentration; with
    `times` (the `time` objective), expected durations and failure kinds (`learning.durations`), and the
    replan penalty the traces taught."""

    keys: tuple[str, ...]
    base: np.ndarray
    mean: np.ndarray
    concentration: np.ndarray
    times: TimeEstimate | None = None
    replan_ms: float = DEFAULT_MS
    tried: np.ndarray | None = None  # which have recorded steps of their own (None: all, as far as `mean` goes)


def action_posteriors(
    model: FailureModel | None,
    task: Task,
    actions: Sequence[GroundAction],
    features: Mapping[str, Any] | None = None,
    objective: Objective = "risk",
) -> Posteriors:
    """What the model believes of each action; `model=None` (nothing learned yet): p_fail 0, the task's costs.
    Object types come from the task. Durations are predicted only for the `time` objective (a model stored
    before they were learned: every step the default duration)."""
    base = np.array([action_cost(task, a) for a in actions], dtype=float)
    if model is None:
        mean, concentration = np.zeros(len(actions)), np.full(len(actions), np.inf)
        tried = None
    else:
        mean, concentration = model.predict_posterior(actions, features, object_types=task.objects())
        tried = model.predict_tried(actions, features)
    posteriors = Posteriors(
        tuple(str(a) for a in actions), base, np.clip(mean, 0.0, MAX_P_FAIL), concentration, tried=tried
    )
    if check_objective(objective) == "time":
        durations = getattr(model, "durations_", None) or TimeModel()
        times = durations.predict(actions, features, object_types=task.objects())
        posteriors = replace(posteriors, times=times, replan_ms=durations.replan_ms)
    return posteriors


def priced(
    posteriors: Posteriors,
    lam: float = 1.0,
    explore: Explore = DEFAULT_EXPLORE,
    rng: np.random.Generator | None = None,
    time: TimeParams | None = None,
) -> dict[str, ActionCost]:
    """Cost of each action under an exploration policy, keyed by its PDDL form: the `risk` objective, or with
    `time` (and posteriors made for it) the `time` objective's (`learning.objective`; `lam` unused)."""
    if not np.isfinite(posteriors.concentration).all():  # no posterior to be uncertain about
        p_plan = posteriors.mean
    else:
        p_plan = explore_p_fail(posteriors.mean, posteriors.concentration, explore, rng, tried=posteriors.tried)
    if time is not None:
        return _time_priced(posteriors, p_plan, time)
    risk = -lam * np.log1p(-np.clip(p_plan, 0.0, MAX_P_FAIL))
    at_mean = -lam * np.log1p(-np.clip(posteriors.mean, 0.0, MAX_P_FAIL))
    cost = posteriors.base + risk
    return {
        key: ActionCost(
            base_cost=float(b), p_fail=float(p), cost=float(c), charge=float(r - r0), concentration=float(k)
        )
        for key, b, p, c, r, r0, k in zip(
            posteriors.keys, posteriors.base, posteriors.mean, cost, risk, at_mean, posteriors.concentration
        )
    }


def _time_priced(posteriors: Posteriors, p_plan: np.ndarray, time: TimeParams) -> dict[str, ActionCost]:
    times = posteriors.times
    if times is None:
        raise ValueError("the time objective needs posteriors made with action_posteriors(objective='time')")
    replan = posteriors.replan_ms if time.replan_ms is None else time.replan_ms
    p, p_retry = split_retries(np.clip(p_plan, 0.0, MAX_P_FAIL), times.attempts, times.retries, times.failed_retries)
    ms = expected_ms(
        p, times.success_ms, times.failure_ms, times.retried, times.side_effects, time.max_retries, replan,
        time.side_effect_weight, p_retry,
    )  # fmt: skip
    return {
        key: ActionCost(
            base_cost=float(b), p_fail=float(p), cost=float(m) / 1000.0, expected_ms=float(m), concentration=float(k)
        )
        for key, b, p, m, k in zip(posteriors.keys, posteriors.base, posteriors.mean, ms, posteriors.concentration)
    }


def action_costs(
    model: FailureModel | None,
    task: Task,
    actions: Sequence[GroundAction],
    features: Mapping[str, Any] | None = None,
    lam: float = 1.0,
    explore: Explore = DEFAULT_EXPLORE,
    rng: np.random.Generator | None = None,
    objective: Objective = "risk",
    time: TimeParams | None = None,
) -> dict[str, ActionCost]:
    """Cost of each grounded action, keyed by its PDDL form (`"(drive t1 a b)"`, as `PlanRequest.costs`).

    `model=None` (nothing learned yet) gives p_fail 0 and the task's own costs. Object types come from the task.
    `objective="time"` prices expected milliseconds (`learning.objective`; `time` its parameters, default ones
    when None).
    """
    posteriors = action_posteriors(model, task, actions, features, objective)
    if objective == "time":
        return priced(posteriors, lam, explore, rng, time or TimeParams())
    return priced(posteriors, lam, explore, rng)


CREDIBLE = 0.9  # the interval `describe` gives p_fail


def describe(
    costs: Mapping[str, ActionCost], model: FailureModel | None, features: Mapping[str, Any] | None = None
) -> dict[str, ActionCost]:
    """`costs` (keyed by each action's PDDL form, as `priced` gives them) with each action's `evidence`
    (`FailureModel.predict_evidence` in the situation `features`) and the `CREDIBLE` interval of its p_fail (the
    quantiles of the Beta posterior of its mean and concentration): what `portfolio costs` and its HTTP, MCP and
    Python forms show. Planning never calls it."""
    if model is None or not costs:
        return dict(costs)
    from scipy.special import betaincinv

    from domains.ground_text import parse_ground_action

    keys = list(costs)
    evidence = dict(zip(keys, model.predict_evidence([parse_ground_action(k) for k in keys], features)))
    mean = np.clip(np.array([costs[k].p_fail for k in keys], dtype=float), 1e-9, 1.0 - 1e-9)
    concentration = np.array([costs[k].concentration or np.inf for k in keys], dtype=float)
    finite = np.isfinite(concentration)
    tail = (1.0 - CREDIBLE) / 2.0
    low, high = mean.copy(), mean.copy()
    a, b = mean[finite] * concentration[finite], (1.0 - mean[finite]) * concentration[finite]
    low[finite], high[finite] = betaincinv(a, b, tail), betaincinv(a, b, 1.0 - tail)
    return {
        k: replace(costs[k], interval=(float(lo), float(hi)), evidence=evidence.get(k))
        for k, lo, hi in zip(keys, low, high)
    }


def cost_rows(costs: Mapping[str, ActionCost]) -> list[dict[str, Any]]:
    """The rows every interface shows (`portfolio costs`, `POST /v1/costs`, MCP `costs`): riskiest first (what was
    learned), then dearest, then by name; values rounded to 6 decimals, so the CLI, HTTP and MCP list the same
    actions in the same order. With `describe`'s fields: `p_fail_90` (the interval), and `steps`, `failures`,
    `since_change`, `failures_since`, `runs_ago`, `last_seen` (0 steps and None where nothing was recorded) and
    `shared_change` (the probability that it shares a change a grounding alike but for one object showed)."""
    return [
        {"action": name, "base_cost": c.base_cost, "p_fail": round(c.p_fail, 6), "cost": round(c.cost, 6)}
        | ({} if c.expected_ms is None else {"expected_ms": round(c.expected_ms, 3)})
        | {"charge": round(c.charge, 6)}
        | ({} if c.interval is None else {"p_fail_90": [round(c.interval[0], 6), round(c.interval[1], 6)]})
        | _evidence_row(c.evidence)
        for name, c in sorted(costs.items(), key=lambda item: (-round(item[1].p_fail, 6), -item[1].cost, item[0]))
    ]


def _evidence_row(evidence: Evidence | None) -> dict[str, Any]:
    if evidence is None:
        return {
            "steps": 0, "failures": 0, "since_change": 0, "failures_since": 0, "runs_ago": None, "last_seen": None,
            "shared_change": 0.0,
        }  # fmt: skip
    return {
        "steps": evidence.steps,
        "failures": evidence.failures,
        "since_change": evidence.since_change,
        "failures_since": evidence.failures_since,
        "runs_ago": evidence.runs_ago,
        "last_seen": evidence.last_seen,
        "shared_change": round(evidence.shared_change, 6),
    }


def last_seen_text(row: dict[str, Any]) -> str:
    """A `cost_rows` row's "last seen": never, or runs ago and the step's timestamp where steps carry one."""
    if row["runs_ago"] is None:
        return "never"
    when = "last run" if row["runs_ago"] == 0 else f"{row['runs_ago']} runs ago"
    return f"{row['last_seen']} ({when})" if row["last_seen"] else when


def plan_success_probability(costs: Mapping[str, ActionCost], plan: Iterable[GroundAction | str]) -> float:
    """Probability that every step of `plan` succeeds: the product of (1 - p_fail), assuming independent steps.
    Steps may be `GroundAction`s or PDDL strings; a step without a cost entry raises KeyError."""
    probability = 1.0
    for step in plan:
        key = ground_action_text(step)  # the one normal form (domains.ground_text)
        if key not in costs:
            raise KeyError(f"no learned cost for {key}: compute action_costs() for every action of the plan")
        probability *= 1.0 - costs[key].p_fail
    return probability


@dataclass(frozen=True)
class PlanPrice:
    """What a plan comes to under learned costs: `cost`, the sum of its steps' costs (rounded to 6 decimals, as
    `PlanResult.learned_cost` shows it), and `success_probability` (`plan_success_probability`)."""

    cost: float
    success_probability: float


def plan_price(costs: Mapping[str, ActionCost], plan: Iterable[GroundAction | str]) -> PlanPrice | None:
    """`plan` priced under `costs` (`PlanPrice`), or None when a step has no cost entry (a plan found by a
    delegate that grounded actions the costs were not computed for): what `Planner.plan` reports of its plan and
    `Planner.explain` of the base-cost plan."""
    keys = [ground_action_text(step) for step in plan]
    if not all(key in costs for key in keys):
        return None
    return PlanPrice(round(sum(costs[key].cost for key in keys), 6), plan_success_probability(costs, keys))
