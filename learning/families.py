"""How strongly each token's weight is shrunk: the prior's scales, fitted from the data.

The token prior (`learning.prior`) is an L2 logistic regression, that is a Gaussian prior on every weight. With
one variance for all weights, a failure pattern is spread over every token present where it happens: the cheap
web engine failing at peak hours went partly to the engine-at-peak token and partly to the job-at-peak,
topic-at-peak and job-engine tokens of the cells where it was seen, so a new job at peak started at 0.3 where
its engine had failed 30 times in 39 (0.77). Only the shared token carries over to groundings never seen.

Here each weight gets its own prior scale, fitted by MacKay's evidence framework (a diagonal Laplace
posterior), in two levels:
- a family of tokens (`token_family`: the argument position, the pair of positions, the feature key, or an
  argument position in a feature key) has a scale: by MacKay's fixed point, the root of its weights' squares
  summed over the number of them the data determines (gamma = 1 - posterior variance / prior variance, summed).
  A family that explains failures (engine x hour) is shrunk less; one that only fits noise (job x hour, topic x
  weather) towards nothing, so the failures go to the tokens that explain them wherever they occur;
- each token's variance is a Student-t's around its family's (Gelman et al.'s weakly informative prior for
  logistic regression, `DF` degrees of freedom): (weight^2 + posterior variance + DF * family variance) /
  (1 + DF). A family of sparse effects (three bad roads among forty) has a small variance, set by the many; with
  the Gaussian alone the three were shrunk with them (pairs worlds, held out: learned / oracle 0.97 -> 0.955
  median and failures / cost-blind 0.31 -> 0.37), the heavy tail lets a large weight keep its size.
Scaling a column by s is the same as a prior of variance s^2 on its weight, so each round is one liblinear fit
on the same sparse matrix. What it changed is measured in `learning.features`' docstring, together with
situations entering the prior through objects only. Cost: up to `ROUNDS` extra fits per action name.

The family's update was EM's at first (the mean over the family of weight^2 + posterior variance). A family the
data says little about has a posterior variance near its prior's, so EM barely moves it, and in `ROUNDS` rounds
noise families stayed near the unit prior: on a captured tools trace (world 9, 160 episodes) a job at peak hours
or in the rain kept weights of +-0.4 and the timing-out database's own token 0.2, so its queries were priced
0.05-0.5 for a true 0.3 (priors 0.15 on average where it had failed 0.24; `tests/test_learning_shrinkage.py`
has that shape: cells' mean absolute error 0.065 -> 0.048). With MacKay's fixed point the noise families'
token scales fall round after round (median 0.7 after one round, 0.2-0.33 after six, the databases' family
0.87): on the same trace the database's token weighs 1.0, noise tokens 0.1, priors 0.20. Closed loop
(`portfolio bench learning --policies mean`, last 50 of 200 episodes, learned / oracle expected success pooled,
worlds >= 0.95): tuning seeds 0-19, tools 0.971 (14 of 20) -> 0.994 (17); seeds 0-9, vehicle-roads 0.982 (10 of
10) -> 0.977 (9); seeds 0-4 of the nine other types alike (0.98-1.00). Held out, seeds 3000-3019, both arms in
one session: tools 1.002 (17 of 20, worst 0.86) -> 1.013 (17, worst 0.92), vehicle-roads 0.988 (19) -> 0.981
(18), and every other type 0.98-1.00 pooled after (pairs and costed 18 of 20, detours 19: one world at 0.59,
0.80 before, an unlucky road: its detour's drives failed by chance and were never tried again under `mean`).
Seeds 3100-3119 likewise: tools 0.986 (14 of 20) -> 0.990 (14), vehicle-roads 0.975 (17) -> 0.977 (17). So a
better estimate, and in closed loop a draw within the worlds' spread (per world, the same code gives +-0.05 from
run to run): kept for the estimate.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from learning.prior import capped, fit_logistic

# Scales stay in these bounds (relative to the unit prior C sets): the floor keeps a token that shows nothing
# from vanishing for good (it can come back when evidence arrives); the ceiling keeps a handful of steps from
# buying an unbounded weight.
SCALE_BOUNDS = (0.05, 4.0)
ROUNDS = 6
DF = 1.0  # the Student-t's degrees of freedom: 1 is a Cauchy, Gelman et al.'s default
GAMMA_FLOOR = 1e-3  # a family none of whose weights the data determines: its variance goes to the floor


def token_family(token: str) -> str:
    """The family a token's weight is drawn from: its kind and position (`g`, `a2`, `p01`, `u`, `t0`), its
    feature key (`f:hour`, `n:load`), or both for an argument in a situation (`a2&f:hour`)."""
    head, _, rest = token.partition(":")
    if head in ("f", "n"):
        return head + ":" + rest.partition("=")[0]
    _obj, situated, situation = rest.partition("&f:")
    if situated:
        return head + "&f:" + situation.partition("=")[0]
    return head


def token_scales(
    X: sparse.csr_matrix,
    vocab: dict[str, int],
    n: np.ndarray,
    f: np.ndarray,
    C: float,
    anchor: tuple[float, float],
    rounds: int = ROUNDS,
    df: float = DF,
) -> np.ndarray:
    """Per column of `X`, the prior scale of its weight (see the module docstring); multiply the columns by it
    before fitting, and the fitted weights by it after. `n`, `f`, `C` and `anchor` as for
    `learning.prior.fit_logistic`. All ones when there is nothing to separate."""
    families = [""] * X.shape[1]
    for token, col in vocab.items():
        families[col] = token_family(token)
    names = {name: i for i, name in enumerate(sorted(set(families)))}
    index = np.array([names[family] for family in families], dtype=int)
    n_cap, _ = capped(n, f)
    squared = X.multiply(X).tocsc()
    scale = np.ones(X.shape[1])
    for _ in range(rounds):
        scaled = (X @ sparse.diags(scale)).tocsr()
        model = fit_logistic(scaled, n, f, C, anchor)
        if model is None:
            break
        p = model.predict_proba(scaled)[:, 1]
        curvature = squared.T @ (n_cap * p * (1.0 - p))  # the data's part of each weight's precision
        weight = model.coef_[0][: len(scale)] * scale
        posterior = 1.0 / (C * curvature + 1.0 / scale**2)
        second_moment = weight**2 + posterior
        # MacKay's fixed point: a family's variance is its weights' squares over the number of them the data
        # determines (gamma = 1 - posterior / prior variance). The EM update (squares plus posterior variances,
        # over all members) barely moves a family the data says little about: its posterior variance is its
        # prior's, so six rounds left noise families near the unit prior.
        gamma = np.clip(1.0 - posterior / scale**2, GAMMA_FLOOR, 1.0)
        family_variance = np.bincount(index, weights=weight**2, minlength=len(names)) / np.bincount(
            index, weights=gamma, minlength=len(names)
        )
        family_variance = np.clip(family_variance, SCALE_BOUNDS[0] ** 2, SCALE_BOUNDS[1] ** 2)
        new = np.sqrt((second_moment + df * family_variance[index]) / (1.0 + df))
        new = np.clip(new, *SCALE_BOUNDS)
        done = np.allclose(new, scale, rtol=0.02)
        scale = new
        if done:
            break
    return scale
