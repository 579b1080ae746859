"""Exploration: the p_fail a planning call prices each grounded action at, given its posterior.

Input: per grounding, the Beta posterior of its failure probability (mean p, concentration n + m pseudo-steps)
and whether it has recorded steps of its own (`tried`). Output: the p_fail to plan with, one per grounding;
`learning.costs` turns it into a cost. The p_fail reported to users is always the posterior mean: the policy
changes only what planning pays.

- `cautious` (the default): the posterior mean plus `PESSIMISM` (one) posterior standard deviations,
  sqrt(p (1 - p) / (concentration + 1)), for a grounding with recorded steps of its own; an untried one at its
  mean. Why: the planner picks the plan that is cheapest under the estimates, so it favours steps whose risk is
  underestimated (the optimizer's curse); charging for uncertainty counters that and fades as evidence grows,
  while an untried alternative keeps its optimistic prior and still gets tried. So a grounding's cost can rise
  after its first success: it now has a record of its own, and is charged for how little that record says.
  When a step of the plan it finds is believed to fail more often than not (p_fail at least `EXPLORE_ABOVE`),
  the planning call plans once more under a Thompson draw (`explore_again`). Why: charging for uncertainty
  keeps an alternative written off after one unlucky try off the plans for good, even beside a step that fails
  most of the time; beside such a step, a try of what might be better costs little and can save every later
  call. A step, not the whole plan: a long plan of reliable steps may be as likely to fail, and has nothing
  better to find. Not under quality `first`, whose plan need not be the cheapest under the costs it was given.
- `thompson`: a fresh draw from each grounding's Beta posterior per planning call. Why: a rarely tried
  alternative has a wide posterior, so it is sometimes drawn cheap and gets tried (probability matching).
- `optimistic`: the `UCB_QUANTILE` (10%) lower quantile of p_fail (Bayes-UCB): every grounding priced as
  reliable as it plausibly is. Why: an alternative written off after an unlucky start still gets tried.
  Deterministic.

`explore_p_fail(mean, concentration, policy, rng=None, tried=None)` returns the p_fail array, in the order
given; `explore_again(policy, p_fail)` the policy to plan once more under, or None.
`check_explore(name)` checks a policy name for the interfaces: an unknown one is a ValueError listing the
policies; the deprecated names `mean` (for `cautious`) and `ucb` (for `optimistic`) are mapped, with a warning
once per process. What was measured, and why `cautious` is the default: docs/decisions/explore-policies.md.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

Policy = Literal["cautious", "thompson", "optimistic"]
# Every name a caller may pass: the policies and their old names (`ALIASES`).
Explore = Literal["cautious", "thompson", "optimistic", "mean", "ucb"]
EXPLORE_POLICIES: tuple[Policy, ...] = ("cautious", "thompson", "optimistic")
# Old names, still accepted: `mean` never priced at the plain mean, `ucb` is an optimistic quantile.
ALIASES: dict[str, Policy] = {"mean": "cautious", "ucb": "optimistic"}
DEFAULT_EXPLORE: Policy = "cautious"
UCB_QUANTILE = 0.1
PESSIMISM = 1.0  # posterior standard deviations `cautious` adds for a tried grounding (decision record: why 1)
# `cautious` plans once more under a Thompson draw when a step of its plan is believed to fail at least this
# often: more often than it succeeds (decision record: what it measured)
EXPLORE_ABOVE = 0.5
_EPS = 1e-6
_warned: set[str] = set()  # the old names already warned about in this process


def explore_policy(name: str) -> Policy:
    """The policy `name` stands for (an old name mapped, silently); ValueError listing the policies if none."""
    policy = ALIASES.get(name, name)
    if policy not in EXPLORE_POLICIES:
        raise ValueError(f"unknown explore policy {name!r}; expected one of: {', '.join(EXPLORE_POLICIES)}")
    return policy


def renamed(name: str) -> str:
    """`name`, or the policy an old name (`ALIASES`) stands for, warning once per process per old name (a
    `logging` warning and a DeprecationWarning). Anything else comes back unchanged, for the caller to reject:
    argparse's `type=` for `--explore`, before it checks the choices."""
    policy = ALIASES.get(name)
    if policy is None:
        return name
    message = f"explore policy {name!r} is now called {policy!r}; the old name will be removed"
    if name not in _warned:
        _warned.add(name)
        log.warning(message)
    warnings.warn(message, DeprecationWarning, stacklevel=2)
    return policy


def check_explore(name: str) -> Policy:
    """The policy `name` names, for the interfaces (CLI, HTTP, MCP, `Planner`, `Agent`): an old name is mapped
    with a warning (`renamed`); an unknown one is a ValueError listing the policies."""
    return explore_policy(renamed(name))


def explore_p_fail(
    mean: np.ndarray,
    concentration: np.ndarray,
    policy: Explore,
    rng: np.random.Generator | None = None,
    pessimism: float = PESSIMISM,
    tried: np.ndarray | None = None,
) -> np.ndarray:
    """The p_fail to plan with for each grounding under `policy` (module docstring). For `cautious`:
    `pessimism` posterior standard deviations over the mean, for the groundings `tried` says have records of
    their own (all when None). `rng` draws for `thompson`."""
    import numpy as np  # here, not at the top: the planner imports this module for the names alone

    name = explore_policy(policy)
    mean = np.clip(np.asarray(mean, float), _EPS, 1.0 - _EPS)
    if len(mean) == 0:
        return mean
    c = np.maximum(np.asarray(concentration, float), _EPS)
    if name == "cautious":
        charge = pessimism * np.sqrt(mean * (1.0 - mean) / (c + 1.0))
        if tried is not None:
            charge = np.where(tried, charge, 0.0)
        return np.clip(mean + charge, _EPS, 1.0 - _EPS)
    a, b = mean * c, (1.0 - mean) * c
    if name == "thompson":
        return (rng or np.random.default_rng()).beta(a, b)
    from scipy.special import betaincinv

    return betaincinv(a, b, UCB_QUANTILE)


def explore_again(policy: Policy, p_fail: Iterable[float]) -> Policy | None:
    """The policy a planning call plans once more under, after `policy` found a plan whose steps are believed to
    fail with `p_fail` (the posterior means): `thompson` after a `cautious` plan with a step at `EXPLORE_ABOVE`
    or more; None otherwise (and for a plan of no steps)."""
    if policy == "cautious" and max(p_fail, default=0.0) >= EXPLORE_ABOVE:
        return "thompson"
    return None
