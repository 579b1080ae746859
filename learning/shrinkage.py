"""Empirical-Bayes shrinkage of each grounding's own failure counts towards a prior prediction.

For a grounding g (in one situation) with recency-weighted steps n_g and failures f_g, and a prior prediction
q_g from a model that never saw g's own steps:

    p_g = (f_g + m * q_g) / (n_g + m)

the posterior mean of a Beta(m q_g, m (1 - q_g)) prior, with m, the prior's strength in pseudo-steps, fitted per
action name and bounded to [`MIN_STRENGTH`, `MAX_STRENGTH`]. Shrinking lets a grounding with few steps borrow
from what it shares with others, and one with many speak for itself. Arrays in, floats and arrays out; no state.

- `fit_strength(n, f, q, default)`: m maximising the beta-binomial marginal likelihood of the groundings'
  counts; `default` where they cannot tell spread from noise (`identifies_strength`).
- `fit_mixture(n, f, q, default)`: (m, outlier share) by EM, each grounding a member of the prior's population
  or an outlier with a broad Beta(1, 1); `fit_kin_mixture` shares the outlier status across a kin group (a
  grounding's cells in every situation and its mirrors) and returns each cell's group probability and rate.
- `posterior(n, f, q, m, tolerance, trust, ...)`: each grounding's posterior mean p_fail and concentration,
  mixing member and outlier estimates by `outlier_weights`. Consistent: it stays within
  `tolerance * (trust / n_g)^2` of the grounding's own rate, so as n_g grows p_g tends to f_g / n_g.
- `population_means`: the prior without a token model, the population's mean rate with m integrated out.

Why m is bounded at 10, why outliers are fit per kin group, why m is integrated out for a lone grounding, and
why the band counts weighted steps, with what was measured: docs/decisions/prior-strength.md.

    m, share = fit_mixture(n, f, q, default=10.0)
    p_fail, concentration = posterior(n, f, q, m, tolerance=0.05, trust=25.0, outlier_share=share)
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaln, logsumexp

MIN_STRENGTH = 1.0
MAX_STRENGTH = 10.0
INFORMATIVE_STEPS = 1.5  # (recency-weighted) steps above which a grounding's counts say something about m
_Q_CLIP = 1e-4


# `population_means`' grids: the population's mean rate (on the log-odds scale) and its concentration m.
_MU_GRID = 1.0 / (1.0 + np.exp(-np.linspace(-9.0, 9.0, 241)))
_M_GRID = np.exp(np.linspace(np.log(MIN_STRENGTH), np.log(MAX_STRENGTH), 12))


def population_means(
    n: np.ndarray, f: np.ndarray, prior_mean: float, prior_strength: float
) -> tuple[float, np.ndarray]:
    """The expected failure rate of a grounding never tried, from all groundings and from all but each one (its
    prior: a model that never saw it). From tried groundings' (recency-weighted) steps `n` and failures `f`, one
    entry per grounding: the posterior mean of the population's mean rate mu in

        mu ~ Beta(s0 mu0, s0 (1 - mu0)),  m ~ log-uniform on [MIN_STRENGTH, MAX_STRENGTH],
        p_g ~ Beta(m mu, m (1 - mu)),     f_g ~ Binomial(n_g, p_g),

    with mu0, s0 = `prior_mean`, `prior_strength` (the optimistic prior for nothing), integrated on a grid.
    m, how much groundings differ, is not fixed but integrated out: a single grounding cannot tell a bad
    population (every sibling fails) from a bad grounding (only it fails), and the data that could (a second
    grounding) is missing, so its failures move mu only as far as the plausible spreads allow. One grounding
    that failed 8 of 8 moves a new one from 0.05 to 0.18 (with m fixed at 10, 0.33; pooling its steps as the
    population's, 0.47); two such groundings 0.30, three 0.40: replicated failures generalise, a lone one
    mostly stays its own."""
    n, f = np.asarray(n, float), np.asarray(f, float)
    keep = n > 1e-9
    loo = np.full(len(n), float(prior_mean))
    if not keep.any():
        return float(prior_mean), loo
    mu0 = min(max(prior_mean, 1e-4), 1.0 - 1e-4)
    a0, b0 = prior_strength * mu0, prior_strength * (1.0 - mu0)
    mu = _MU_GRID
    # the hyperprior's density on the grid times the grid's spacing
    log_prior = (a0 - 1.0) * np.log(mu) + (b0 - 1.0) * np.log1p(-mu) + np.log(np.gradient(mu))
    n_k, f_k = n[keep], np.minimum(f[keep], n[keep])
    # groundings with nearly the same counts share their likelihood (steps binned at 2%, the rate kept, or
    # binned at 0.01 when the rates are many): an action that never failed may have thousands of groundings,
    # but few distinct counts
    steps = np.exp(np.round(np.log(n_k) / 0.02) * 0.02)
    rate = f_k / n_k
    if len(np.unique(rate.round(6))) > 256:
        rate = rate.round(2)
    rows, inverse, weight = np.unique(
        np.stack([steps, rate * steps], axis=1).round(6), axis=0, return_inverse=True, return_counts=True
    )
    a, b = _M_GRID[None, :, None] * mu, _M_GRID[None, :, None] * (1.0 - mu)
    terms = np.concatenate(
        [
            _log_bb(rows[i : i + 256, 0, None, None], rows[i : i + 256, 1, None, None], a, b)
            for i in range(0, len(rows), 256)
        ]
    )  # (distinct counts, m, mu)
    total = np.tensordot(weight.astype(float), terms, axes=1)

    def mean(log_like: np.ndarray) -> np.ndarray:
        log_w = log_prior + logsumexp(log_like, axis=-2)  # m integrated out (uniform on its log grid)
        w = np.exp(log_w - log_w.max(axis=-1, keepdims=True))
        return np.sum(w * mu, axis=-1) / np.sum(w, axis=-1)

    full = float(mean(total))
    loo[keep] = mean(total[None] - terms)[np.ravel(inverse)]
    loo[~keep] = full
    return full, loo


def identifies_strength(n: np.ndarray) -> bool:
    """Whether counts `n` (one entry per grounding) can tell how much groundings differ (m): it takes three
    groundings with more than one step each. A grounding's single step says nothing about m: under any m its
    outcome has probability q_g or 1 - q_g, so the likelihood is flat in m and its maximum lands on a bound
    (what that did, measured: docs/decisions/prior-strength.md)."""
    return int((np.asarray(n, float) > INFORMATIVE_STEPS).sum()) >= 3


def fit_strength(n: np.ndarray, f: np.ndarray, q: np.ndarray, default: float) -> float:
    """m maximising sum_g log BetaBinomial(f_g | n_g, m q_g, m (1 - q_g)) (the binomial coefficients do not
    depend on m). Counts that cannot tell spread from noise (`identifies_strength`): `default` then."""
    keep = n > 1e-9
    if int(keep.sum()) < 3 or not identifies_strength(n[keep]):
        return float(default)
    n, f = n[keep], np.minimum(f[keep], n[keep])
    return _strength(n, f, np.clip(q[keep], _Q_CLIP, 1.0 - _Q_CLIP), np.ones_like(n))


def _strength(n: np.ndarray, f: np.ndarray, q: np.ndarray, weights: np.ndarray) -> float:
    """m in [`MIN_STRENGTH`, `MAX_STRENGTH`] maximising the `weights`-weighted beta-binomial log-likelihood."""

    def negative_log_likelihood(log_m: float) -> float:
        m = np.exp(log_m)
        return -float(np.sum(weights * _log_bb(n, f, m * q, m * (1.0 - q))))

    from scipy.optimize import minimize_scalar  # fitting only: prediction never imports the optimisers

    found = minimize_scalar(
        negative_log_likelihood,
        bounds=(np.log(MIN_STRENGTH), np.log(MAX_STRENGTH)),
        method="bounded",
        options={"xatol": 1e-3},
    )
    return float(np.exp(found.x))


def posterior(
    n: np.ndarray,
    f: np.ndarray,
    q: np.ndarray,
    m: float,
    tolerance: float,
    trust: float,
    outlier_share: float = 0.0,
    outlier: np.ndarray | None = None,
    outlier_rate: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean p_fail and concentration (pseudo-steps, for sampling) of each grounding, from its
    recency-weighted steps `n` and failures `f`; with `outlier_share` > 0, a mixture of the shrunk estimate
    and the broad component's, weighted by how likely the grounding is an outlier (`outlier_weights`).
    `tolerance` and `trust` have no defaults here: they are `FailureModel`'s parameters, set in one place.
    `outlier` and `outlier_rate`, where given (not NaN), are each cell's kin group's outlier probability and
    pooled rate (`fit_kin_mixture`), used instead of the cell's own."""
    n, f, q = np.asarray(n, float), np.asarray(f, float), np.asarray(q, float)
    mean = (f + m * q) / (n + m)
    if outlier_share > 0.0:
        r = outlier_weights(n, f, q, m, outlier_share)
        own = (f + BROAD[0]) / (n + BROAD[0] + BROAD[1])
        if outlier is not None and outlier_rate is not None:  # the kin groups' (`fit_kin_mixture`), where fitted
            known = ~np.isnan(outlier)
            r = np.where(known, np.nan_to_num(outlier), r)
            pooled = (f + OUTLIER_POOL * np.nan_to_num(outlier_rate)) / (n + OUTLIER_POOL)
            own = np.where(known, pooled, own)
        mean = (1.0 - r) * mean + r * own
    seen = n > 1e-9
    if seen.any():
        rate = np.divide(f, n, out=np.zeros_like(n), where=seen)
        band = np.full_like(n, np.inf)
        band[seen] = tolerance * (trust / n[seen]) ** 2
        mean = np.where(seen, np.clip(mean, rate - band, rate + band), mean)
    return np.clip(mean, 0.0, 1.0), n + m


# The broad component of the mixture: a grounding that is broken in its own way, with any failure rate.
BROAD = (1.0, 1.0)
# The share of outliers believed where too few groundings were seen to fit it (a tool with one grounding): one
# in ten. With it, 3 failures in 3 calls of a lone tool make it more likely broken than not (p_fail 0.77), and a
# tool failing half its calls is priced near 0.5 after 20 calls; with no share (the prior's m = 10 pseudo-steps
# at 0.05 alone) they were 0.27 and 0.27-0.47.
PRIOR_OUTLIER_SHARE = 0.1
EM_ROUNDS = 8


def _log_bb(n: np.ndarray, f: np.ndarray, a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    return betaln(f + a, n - f + b) - betaln(a, b)


def outlier_weights(n: np.ndarray, f: np.ndarray, q: np.ndarray, m: float, share: float) -> np.ndarray:
    """Posterior probability that each grounding is an outlier (its counts drawn from the broad Beta) rather
    than a member of the prior's population (Beta(m q, m (1 - q))); 0 without counts."""
    n, f = np.asarray(n, float), np.minimum(np.asarray(f, float), np.asarray(n, float))
    out = np.zeros_like(n)
    seen = n > 1e-9
    if share <= 0.0 or not seen.any():
        return out
    qc = np.clip(np.asarray(q, float)[seen], _Q_CLIP, 1.0 - _Q_CLIP)
    log_in = np.log1p(-share) + _log_bb(n[seen], f[seen], m * qc, m * (1.0 - qc))
    log_out = np.log(share) + _log_bb(n[seen], f[seen], *BROAD)
    out[seen] = 1.0 / (1.0 + np.exp(np.clip(log_in - log_out, -500, 500)))
    return out


def fit_mixture(
    n: np.ndarray, f: np.ndarray, q: np.ndarray, default: float, start: float | None = None
) -> tuple[float, float]:
    """(m, outlier share) by EM: groundings are either members of the prior's population, Beta(m q, m (1-q)),
    or outliers with a broad Beta; m is refit on the members' weights each round. A handful of groundings that
    fail most of the time (a broken road among hundreds of fine ones) does not pull m down for all, nor
    stay shrunk towards a prior that describes the others. With fewer than three groundings the share is not
    identified: `PRIOR_OUTLIER_SHARE`, so a lone tool's own record can still say it is broken."""
    keep = n > 1e-9
    if int(keep.sum()) < 3:
        return float(default), PRIOR_OUTLIER_SHARE
    n, f = n[keep], np.minimum(f[keep], n[keep])
    q = np.clip(q[keep], _Q_CLIP, 1.0 - _Q_CLIP)
    m, share = (fit_strength(n, f, q, default) if start is None else start), 0.05  # `start`: m already fit here
    refit = identifies_strength(n)  # else m stays `default`; the share is still told by single steps
    for _ in range(EM_ROUNDS):
        r = outlier_weights(n, f, q, m, share)
        share = float(np.clip(r.mean(), 1e-3, 0.5))
        if refit:
            m = _strength(n, f, q, 1.0 - r)  # refit on the members' weights
    return m, share


OUTLIER_POOL = 2.0  # pseudo-steps by which an outlier group's cell leans on the group's own pooled rate


def fit_kin_mixture(
    n: np.ndarray, f: np.ndarray, q: np.ndarray, kin: np.ndarray, default: float, start: float | None = None
) -> tuple[float, float, np.ndarray, np.ndarray] | None:
    """(m, outlier share, each cell's outlier probability, each cell's outlier rate) by EM, where being an
    outlier is a property of a kin group of cells (a grounding in every situation, and its arguments in any
    order): a group is either a member of the prior's population (each cell Beta(m q, m (1 - q))) or an outlier
    whose cells each have a rate of their own (the broad Beta in the likelihood; as an estimate, a cell's own
    counts leaning `OUTLIER_POOL` pseudo-steps on its group's pooled rate). The share is of groups, so a truck's
    bad road tried once is weighed against how often a road turns out bad for a truck, not against every drive
    ever made. None with fewer than three groups: a share of groups is not identified, the cells are the units
    (`fit_mixture`). `start`: m already fit on these cells by the caller."""
    n, f = np.asarray(n, float), np.minimum(np.asarray(f, float), np.asarray(n, float))
    q = np.clip(np.asarray(q, float), _Q_CLIP, 1.0 - _Q_CLIP)
    kin = np.asarray(kin, int)
    seen = n > 1e-9
    groups = np.unique(kin[seen])
    if len(groups) < 3:
        return None
    size = int(kin.max()) + 1
    group_n = np.bincount(kin, weights=np.where(seen, n, 0.0), minlength=size)
    group_f = np.bincount(kin, weights=np.where(seen, f, 0.0), minlength=size)
    rate = ((group_f + BROAD[0]) / (group_n + BROAD[0] + BROAD[1]))[kin]
    m = fit_strength(n, f, q, default) if start is None else start
    refit = identifies_strength(n[seen])
    share = 0.05
    log_out = np.where(seen, _log_bb(n, f, *BROAD), 0.0)
    r_cell = np.zeros(len(n))
    for _ in range(EM_ROUNDS):
        log_in = np.where(seen, _log_bb(n, f, m * q, m * (1.0 - q)), 0.0)
        diff = np.bincount(kin, weights=log_out - log_in, minlength=size)
        r_group = 1.0 / (1.0 + np.exp(-np.clip(np.log(share) - np.log1p(-share) + diff, -500, 500)))
        share = float(np.clip(r_group[groups].mean(), 1e-3, 0.5))
        r_cell = np.where(seen, r_group[kin], 0.0)
        if refit:
            m = _strength(n[seen], f[seen], q[seen], 1.0 - r_cell[seen])
    return m, share, r_cell, rate
