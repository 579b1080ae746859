"""Exploration: which p_fail a planning call prices each grounded action at, given its posterior.

- `mean`: the posterior mean. Greedy: an alternative whose early estimate is wrong may never be tried again.
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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

Explore = Literal["mean", "thompson", "ucb"]
EXPLORE_POLICIES: tuple[str, ...] = ("mean", "thompson", "ucb")
DEFAULT_EXPLORE: Explore = "mean"
UCB_QUANTILE = 0.1
_EPS = 1e-6


def check_explore(name: str) -> Explore:
    if name not in EXPLORE_POLICIES:
        raise ValueError(f"unknown explore policy {name!r}; expected one of: {', '.join(EXPLORE_POLICIES)}")
    return name  # type: ignore[return-value]


def explore_p_fail(
    mean: np.ndarray, concentration: np.ndarray, policy: Explore, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The p_fail to plan with for each grounding under `policy`."""
    import numpy as np  # here, not at the top: the planner imports this module for the names alone

    check_explore(policy)
    mean = np.clip(np.asarray(mean, float), _EPS, 1.0 - _EPS)
    if policy == "mean" or len(mean) == 0:
        return mean
    c = np.maximum(np.asarray(concentration, float), _EPS)
    a, b = mean * c, (1.0 - mean) * c
    if policy == "thompson":
        return (rng or np.random.default_rng()).beta(a, b)
    from scipy.special import betaincinv

    return betaincinv(a, b, UCB_QUANTILE)
