"""Empirical-Bayes shrinkage of each grounding's own failure counts towards a prior prediction.

For a grounding g (in one situation) with recency-weighted steps n_g and failures f_g, and a prior prediction
q_g from a model that never saw g's own steps:

    p_g = (f_g + m * q_g) / (n_g + m)

the posterior mean of a Beta(m q_g, m (1 - q_g)) prior. m, the prior's strength in pseudo-steps, is fitted per
action name by maximising the beta-binomial marginal likelihood of every grounding's counts: groundings that
all agree with their prior predictions give a large m (pool strongly), groundings that scatter far from them
a small m (trust each grounding's own counts). Bounded to [`MIN_STRENGTH`, `MAX_STRENGTH`]: below 1 a single
failure would condemn a grounding; above 10 the few steps a grounding gets before the planner must choose it or
not are drowned: where most groundings agree with their prior the fit runs to the ceiling, and at m = 50 a drive
that failed 2 of 4 times (true rate 0.7) was still priced at 0.16 and chosen again and again (costed world 812).
The ceiling was picked in closed loop (`portfolio bench learning`, seven routes types, tuning seeds 1000-1019,
140 worlds; worlds reaching 0.95 of the oracle's expected success / worlds within half of cost-blind's failures
where the oracle halves them): 50 -> 134 / 81 of 85, 20 -> 133 / 84, 10 -> 138 / 83, 5 -> 137 / 83; tools
(seeds 0-9) 0.976 -> 0.978 of the oracle pooled, worst world 0.89 -> 0.92. Held out (the docs): more worlds reach
0.95 of the oracle (+2 of 160 on each of two sets), but tools worlds lose a little (pooled -0.009 to -0.018 on two
of three held-out sets): their prior already explains their failures, and a weaker one lets cell noise through.

`fit_mixture` fits m together with an outlier share by EM: a grounding is either a member of the prior's
population or an outlier with a broad Beta(1, 1); `posterior` then mixes the two estimates by the grounding's
posterior odds of being an outlier (`outlier_weights`). One Beta for all groundings cannot say "most drives
fail 2%, a few fail 70%": m is fit large on the many, and a broken grounding stayed near the prior for dozens
of steps.

`fit_kin_mixture` is that mixture with the outlier status shared by a kin group (a grounding's cells in every
situation, and its mirrors: the same objects in another order): whether a truck's road is broken is one fact
about the truck and the road, seen in each way it is driven and in any weather. So a group's cells pool their
evidence for it (one failure each way condemns both), the share is of groups (how often a truck-road pair turns
out bad, not how many of all the cells ever recorded look odd), and an outlier group's cells lean on the group's
own rate (`OUTLIER_POOL`). The cell-level fit found a share near 0.01 on `vehicle-roads`, where a quarter of a
truck's roads fail 70%: each cell's prior had seen the road's other way through its `s:` token, so a bad road
driven both ways looked like a member, and a new bad road's first failure was weighed against a population of
almost only members (0.14-0.37 where Bayes says 0.63; `tests/test_learning_shrinkage.py`).

`population_means` is the prior without a token model (an action name with few steps or one outcome): the
posterior mean of the groundings' population rate, with m integrated out over [`MIN_STRENGTH`,
`MAX_STRENGTH`] instead of fixed. Fixing it (or pooling the steps, as before) assumes the groundings are alike,
which is exactly what a single tried grounding cannot show; integrated out, one grounding that failed 8 of 8
leaves a new one at 0.18 (m fixed at 10: 0.33; the steps pooled: 0.47), a second failing alike takes it to
0.30. Measured closed loop in `learning.model`'s docstring.

As n_g grows p_g tends to f_g / n_g whatever q_g says: the estimate is consistent. A bounded m alone would only
get there slowly (m = 10 and 10 steps leave p_g half way to the prior), so `posterior` also
keeps p_g within `tolerance * (trust / n_g)^2` of the grounding's own recency-weighted rate: with
`FailureModel`'s defaults (0.05, `trust_steps` 25) 0.05 from 25 weighted steps on, wide open below (0.31 at 10),
so little evidence still shrinks freely. The band counts
weighted steps, not recorded ones: measured on 1,000,000 synthetic steps (125,000 per action name, half-life
1,000), counting recorded steps pinned each grounding near a rate resting on under one weighted step, and the
held-out log loss (0.40) was worse than predicting the base rate (0.33).
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
    outcome has probability q_g or 1 - q_g, so the likelihood is flat in m and its maximum lands on a bound. On
    the tools worlds' query-database (17 steps over 15 situation cells, 2 of them with two steps) the fit went
    to MIN_STRENGTH, so each cell's one or two lucky successes priced a 30% query at 0.14-0.21 where the action
    failed 8 of 17, and the planner queried db-news in exactly those cells (with this rule 0.26-0.46; true 0.3).
    Closed loop, tuning seeds 0-19, last 50 of 200 episodes, learned / oracle pooled (worlds >= 0.95): tools
    0.972 (14 of 20) -> 0.977 (15), vehicle-roads 0.955 (12) -> 0.943 (10); the old code run again on the same
    seeds gave 0.977 (15) and 0.952 (13), single worlds moving by up to 0.10 (which search answers first depends
    on timing, and the learner's path with it): a correction of the estimate, not a measured gain."""
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
    fail most of the time (a broken road among hundreds of fine ones) no longer pulls m down for all, nor
    stays shrunk towards a prior that describes the others. With fewer than three groundings the share is not
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
