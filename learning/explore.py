"""Exploration: which p_fail a planning call prices each grounded action at, given its posterior.

- `mean`: the posterior mean, plus `PESSIMISM` posterior standard deviations (below). Greedy: an alternative
  whose early estimate is wrong may never be tried again.
- `thompson`: a fresh draw from each grounding's Beta posterior (mean p, concentration n + m) per planning
  call. A rarely tried alternative has a wide posterior, so it is sometimes drawn cheap and gets tried; as its
  evidence grows its draws settle on its mean. Probability matching: plans are chosen as often as they are
  believed best.
- `ucb`: optimism in the face of uncertainty (Bayes-UCB): the `UCB_QUANTILE` lower quantile of p_fail, so an
  untried grounding is priced as if it were as reliable as it plausibly is. Deterministic.

The benchmark (`python -m benchmarks.experiments.learning_worlds`) measures all three; `DEFAULT_EXPLORE` is its pick.
Measured on the tuning worlds (seeds 0-2 of seven types, 200 episodes, last 50, expected success over the
oracle's, median): mean 0.95-1.00 on every type, thompson 0.92-1.00, ucb 0.92-1.00; failures relative to
cost-blind on `pairs` 0.33 / 0.46 / 0.61 and on `costed` 0.19 / 0.34 / 0.24. Greedy wins because the prior is
optimistic: an untried grounding is already priced at the prior of what it shares with tried ones (0.05 for
nothing, and one grounding's failures are mostly its own: `learning.model`), so it gets tried whenever the
known alternative is worse than that; Thompson's extra draws mostly
re-try groundings already known bad. Thompson or UCB remain the choice when early estimates can be wrong in the
pessimistic direction (a grounding written off after an unlucky start). Re-measured once an untried sibling
stopped inheriting a lone grounding's failures (`learning.model`), tuning seeds 1000-1004 (tools 1000-1002),
last 50 of 200 episodes, learned / oracle pooled, mean / thompson / ucb: pairs 0.976 / 0.972 / 0.973, costed
0.984 / 0.992 / 0.989, groundings 1.000 / 0.986 / 0.988, tools 0.963 / 0.909 / 0.887, type 1.000 for all: mean
stays the default, and an alternative to a grounding that keeps failing is tried under it within a bounded
number of calls (`learning.model`).

Why `mean` adds a standard deviation: the optimizer's curse (Smith & Winkler 2006). The planner returns the plan
that is cheapest under the estimates, so among plans of near-equal estimated cost it picks the one whose steps are
most underestimated; an estimate right on average is too low on the plans chosen. On `tools` worlds a database
that times out 30% of the time was queried by twelve groundings in eight situations, each with a few steps of its
own, and the chosen ones were those priced 0.05-0.2 (`python -m benchmarks.experiments.learning_gap --kinds
tools`: 174 risky steps taken in the last 50 episodes of 20 worlds, believed 0.21 at the median). Charging each
grounding for its uncertainty (the Beta posterior's standard deviation, sqrt(p (1 - p) / (concentration + 1)))
counters that where it arises, and fades as evidence grows: a grounding at 0.3 gains 0.14 with 10 pseudo-steps,
0.05 with 100. Only groundings with recorded steps of their own are charged: an untried one keeps its optimistic
prior, so an alternative to a grounding that keeps failing still gets tried (charged, an untried web engine
beside one that failed 8 of 8 was not planned in 10 calls: `tests/test_learning_untried.py`). Measured,
`portfolio bench learning --policies mean`, 200 episodes, last 50: see `PESSIMISM`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

Explore = Literal["mean", "thompson", "ucb"]
EXPLORE_POLICIES: tuple[str, ...] = ("mean", "thompson", "ucb")
DEFAULT_EXPLORE: Explore = "mean"
UCB_QUANTILE = 0.1
# Posterior standard deviations added to the mean of a tried grounding under `mean` (the module docstring says
# why). Picked on tuning seeds 3500-3519 (tools, 20 worlds, every grounding charged; learned / oracle expected
# success pooled, worlds >= 0.95, learned true cost / oracle's): 0 -> 0.973, 12 of 20, 1.016; 0.5 -> 1.012, 17 of
# 20; 1 -> 1.028, 19 of 20, 1.020. Held out, seeds 3600-3619, tried groundings charged: tools 0.979, 13 of 20 ->
# 1.043, 20 of 20 (true cost 1.016 -> 1.014); the other types in docs/benchmarks.md ("The optimizer's curse").
PESSIMISM = 1.0
_EPS = 1e-6


def check_explore(name: str) -> Explore:
    if name not in EXPLORE_POLICIES:
        raise ValueError(f"unknown explore policy {name!r}; expected one of: {', '.join(EXPLORE_POLICIES)}")
    return name  # type: ignore[return-value]


def explore_p_fail(
    mean: np.ndarray,
    concentration: np.ndarray,
    policy: Explore,
    rng: np.random.Generator | None = None,
    pessimism: float = PESSIMISM,
    tried: np.ndarray | None = None,
) -> np.ndarray:
    """The p_fail to plan with for each grounding under `policy`. For `mean`: `pessimism` posterior standard
    deviations over the mean, for the groundings `tried` says have records of their own (all when None)."""
    import numpy as np  # here, not at the top: the planner imports this module for the names alone

    check_explore(policy)
    mean = np.clip(np.asarray(mean, float), _EPS, 1.0 - _EPS)
    if len(mean) == 0:
        return mean
    c = np.maximum(np.asarray(concentration, float), _EPS)
    if policy == "mean":
        charge = pessimism * np.sqrt(mean * (1.0 - mean) / (c + 1.0))
        if tried is not None:
            charge = np.where(tried, charge, 0.0)
        return np.clip(mean + charge, _EPS, 1.0 - _EPS)
    a, b = mean * c, (1.0 - mean) * c
    if policy == "thompson":
        return (rng or np.random.default_rng()).beta(a, b)
    from scipy.special import betaincinv

    return betaincinv(a, b, UCB_QUANTILE)
