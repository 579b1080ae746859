"""How strongly each token's weight is shrunk: the prior's scales, fitted from the data.

The token prior (`learning.prior`) is an L2 logistic regression, a Gaussian prior on every weight. Fitting each
weight's prior scale lets a failure pattern go to the tokens that explain it wherever it occurs (the engine at
peak hours) instead of spreading over every token present (the job, the topic), so it carries over to
groundings never seen.

- `token_family(token)`: the family a token's weight is drawn from (its kind and position: `g`, `a2`, `p01`,
  `u`, `t0`, or an argument position in a feature key).
- `token_scales(X, vocab, n, f, C, anchor)`: per column of `X`, its weight's prior scale in
  `SCALE_BOUNDS`; multiply the columns by it before fitting and the weights by it after (scaling a column by s is
  a prior of variance s^2 on its weight). All ones when there is nothing to separate.

Two levels, by MacKay's evidence framework (a diagonal Laplace posterior): a family's variance is its weights'
squares over the number of them the data determines, so a family that only fits noise is shrunk towards
nothing; each token's variance is a Student-t's (`DF` degrees of freedom) around its family's, so a few large
effects in a sparse family keep their size. Each round is one liblinear fit on the same sparse matrix: up to
`ROUNDS` extra fits per action name. Why MacKay's update and not EM's, why the Student-t, and what was measured:
docs/decisions/token-scales.md.
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
