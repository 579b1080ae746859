"""One action name's part of the failure model: `ActionModel` (plain data, stored as JSON), how it is fitted,
and the token prior it gives a grounding.

Its own file because fitting one action name is the whole of the estimator's statistics (the token prior,
out-of-fold priors, shrinkage, the outlier mixture, situations), while `learning.model.FailureModel` is the
estimator around it: parameters, streaming counts, hold-out scores and prediction. See `learning.model`'s
docstring for the design and its measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse

from learning.counts import Recent, kin_key
from learning.families import token_scales
from learning.features import RowParser, step_tokens
from learning.prior import capped, design, fit_logistic, out_of_fold
from learning.shrinkage import fit_kin_mixture, fit_mixture, fit_strength, population_means
from learning.situations import borrow_across_situations
from learning.types import type_offset


@dataclass
class ActionModel:
    """What prediction needs for one action name (all plain data: stored as JSON)."""

    kind: str  # "logistic": the prior is the token model; "rate": the groundings' population rate
    strength: float  # m
    base_rate: float
    intercept: float = 0.0
    weights: dict[str, float] = field(default_factory=dict)
    cells: dict[str, list[float]] = field(default_factory=dict)  # cell -> [n_w, f_w, prior, steps, failures]
    evidence: dict[str, list[float]] = field(default_factory=dict)  # "a<i>:<obj>" -> weighted [steps, failures]
    # grounding "args" -> [n_w, f_w, the prior's mean prediction over its cells]: what a situation it was never
    # seen in borrows from its record in the others
    groundings: dict[str, list[float]] = field(default_factory=dict)
    n_steps: int = 0
    n_failures: int = 0
    outlier_share: float = 0.0  # share of kin groups (or, with fewer than three, cells) that are outliers
    # cell -> [probability that its kin group is an outlier, the group's pooled rate] (`fit_kin_mixture`)
    outlier: dict[str, list[float]] = field(default_factory=dict)
    # cell -> [steps since its last change, failures since, runs recorded since it was last seen, changes cut,
    # the weight staleness left its evidence] (`learning.counts.Recent`)
    recent: dict[str, list[float]] = field(default_factory=dict)
    last_seen: dict[str, str] = field(default_factory=dict)  # cell -> its newest step's timestamp, where recorded


def fit_action(
    table: dict[tuple[str, str], list[float]],
    parser: RowParser,
    *,
    prior_mean: float,
    prior_strength: float,
    min_samples: int,
    C: float,
    outliers: bool,
    recent: Mapping[tuple[str, str], Recent] | None = None,
) -> ActionModel:
    """One action name's `ActionModel` from its cells' recency-weighted counts (`learning.counts`): the token
    prior (or the groundings' population rate), each cell's out-of-fold prior, m and the outlier mixture, as
    `learning.model`'s docstring says; the parameters are `FailureModel`'s."""
    parsed = [parser.row(*key) for key in table]
    stats = np.array(list(table.values()), dtype=float).reshape(-1, 4)
    n_w, f_w = stats[:, 0], stats[:, 1]
    steps, failures = int(stats[:, 2].sum()), int(stats[:, 3].sum())
    mu0, s0 = prior_mean, prior_strength
    n_cap, f_cap = capped(n_w, f_w)  # the prior models groundings, not steps: see learning.prior
    base_rate = (f_cap.sum() + s0 * mu0) / (n_cap.sum() + s0)
    groups = [row[4] for row in parsed]
    kin_groups = [kin_key(row[4]) for row in parsed]
    model = None
    if steps >= min_samples and 0 < failures < steps:
        X, vocab = design([row[2] for row in parsed])
        scales = token_scales(X, vocab, n_w, f_w, C, (mu0, s0))
        X = (X @ sparse.diags(scales)).tocsr()  # a scale is its weight's prior standard deviation
        model = fit_logistic(X, n_w, f_w, C, (mu0, s0))
    if model is not None:
        # folds by kin group: a cell's prior must not have seen the grounding's mirror (the same objects in
        # another order), or a truck's bad road tried both ways is 'explained' by its own other half and the
        # outlier share below counts it as a member
        q = out_of_fold(X, n_w, f_w, kin_groups, C, fallback=mu0, strength=s0)
        coef = model.coef_[0]
        weights = {t: float(coef[c] * scales[c]) for t, c in vocab.items() if c < len(coef) and coef[c] != 0.0}
        action = ActionModel("logistic", s0, float(base_rate), float(model.intercept_[0]), weights)
    else:
        base_rate, q = population_rate(groups, n_w, f_w, prior_mean, prior_strength)
        action = ActionModel("rate", s0, base_rate)
    for (args, _features, _tokens, key, _group), row, prior, raw in zip(parsed, stats, q, table):
        if recent:
            _keep_recent(action, key, recent.get(raw))
        cell = action.cells.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
        cell[2] += prior * row[0]  # weight-averaged below: numeric features split a cell's rows
        cell[0] += row[0]
        cell[1] += row[1]
        cell[3] += row[2]
        cell[4] += row[3]
        for i, obj in enumerate(args):
            token = f"a{i}:{obj}"
            seen = action.evidence.setdefault(token, [0.0, 0.0])
            seen[0] += row[0]
            seen[1] += row[1]
    for cell in action.cells.values():
        cell[2] = cell[2] / cell[0] if cell[0] > 0 else mu0
    full = model.predict_proba(X)[:, 1] if model is not None else np.full(len(parsed), base_rate)
    for (_args, _features, _tokens, _key, group), row, predicted in zip(parsed, stats, full):
        seen = action.groundings.setdefault(group, [0.0, 0.0, 0.0])
        seen[0] += row[0]
        seen[1] += row[1]
        seen[2] += predicted * row[0]
    for seen in action.groundings.values():
        seen[2] = seen[2] / seen[0] if seen[0] > 0 else mu0
    cells = np.array(list(action.cells.values()), dtype=float).reshape(-1, 5)
    strength = fit_strength(cells[:, 0], cells[:, 1], cells[:, 2], default=s0)
    if outliers:
        index: dict[str, int] = {}
        kin = np.array([index.setdefault(kin_key(key.partition("|")[0]), len(index)) for key in action.cells])
        kin_fit = fit_kin_mixture(cells[:, 0], cells[:, 1], cells[:, 2], kin, default=s0, start=strength)
        if kin_fit is not None:  # the kin groups carry a grounding's record across its cells: no borrowing
            strength, action.outlier_share, r, rate = kin_fit
            action.outlier = {key: [float(x), float(y)] for key, x, y in zip(action.cells, r, rate)}
            action.strength = strength
            action.n_steps, action.n_failures = steps, failures
            return action
    moved = borrow_across_situations(action.cells, strength)
    if moved:  # refit on the shifted priors
        cells = np.array(list(action.cells.values()), dtype=float).reshape(-1, 5)
    if outliers:
        strength, action.outlier_share = fit_mixture(
            cells[:, 0], cells[:, 1], cells[:, 2], default=s0, start=None if moved else strength
        )
    elif moved:
        strength = fit_strength(cells[:, 0], cells[:, 1], cells[:, 2], default=s0)
    action.strength = strength
    action.n_steps, action.n_failures = steps, failures
    return action


def _keep_recent(action: ActionModel, key: str, seen: Recent | None) -> None:
    """A raw row's `Recent` record into its cell's `action.recent` and `action.last_seen`, summed over the raw
    rows that make one cell (numeric features split a cell's rows)."""
    if seen is None:
        return
    acc = action.recent.get(key)
    if acc is None:
        action.recent[key] = [seen.since_change, seen.failures_since, seen.runs_ago, seen.changes, seen.staleness]
    else:
        acc[0] += seen.since_change
        acc[1] += seen.failures_since
        acc[2] = min(acc[2], seen.runs_ago)
        acc[3] = max(acc[3], seen.changes)  # its kin group's count, on every row alike: not a sum
        acc[4] = max(acc[4], seen.staleness)
    if seen.last_seen is not None and seen.last_seen > action.last_seen.get(key, ""):
        action.last_seen[key] = seen.last_seen


def unseen_rate(
    cells: Mapping[str, Mapping[tuple[str, str], Sequence[float]]], prior_mean: float, prior_strength: float
) -> float:
    """The failure rate of an action name never recorded: the population mean of the recorded action names'
    rates (`learning.shrinkage.population_mean`, each name's weighted steps and failures one member), so an
    agent whose recorded steps all succeeded is not told that every action it has not run yet fails
    `prior_mean` of the time."""
    if not cells:
        return float(prior_mean)
    n = np.array([sum(row[0] for row in table.values()) for table in cells.values()], dtype=float)
    f = np.array([sum(row[1] for row in table.values()) for table in cells.values()], dtype=float)
    return float(population_means(n, f, prior_mean, prior_strength)[0])


def population_rate(
    groups: Sequence[str], n_w: np.ndarray, f_w: np.ndarray, prior_mean: float, prior_strength: float
) -> tuple[float, np.ndarray]:
    """Without a token model: the rate a grounding never tried starts from, and each row's prior (that of
    its grounding with the grounding itself left out), by `learning.shrinkage.population_means`: the
    groundings' rates are a population of unknown spread, so one grounding's failures are mostly its own
    until another grounding repeats them."""
    index: dict[str, int] = {}
    rows = np.array([index.setdefault(g, len(index)) for g in groups], dtype=int)
    own_n = np.bincount(rows, weights=n_w, minlength=len(index))
    own_f = np.bincount(rows, weights=f_w, minlength=len(index))
    full, loo = population_means(own_n, own_f, prior_mean, prior_strength)
    return full, loo[rows]


def token_prior(
    model: ActionModel,
    args: tuple[str, ...],
    features: Mapping[str, Any] | None,
    object_types: Mapping[str, str] | None,
    by_type: dict[str, list[str]],
    pooled: dict[tuple[int, str], float],
    prior_mean: float,
    prior_strength: float,
) -> float:
    """The prior p_fail of a grounding with `args` in a situation (`features`) by `model`'s token weights, an
    object of a seen type moved by its type's offset (`learning.types`); `by_type` and `pooled` are the
    caller's per-call caches of objects by type and of the types' offsets."""
    if model.kind != "logistic":
        return model.base_rate
    get = model.weights.get
    score = model.intercept + sum(get(t, 0.0) * v for t, v in step_tokens(args, features, object_types))
    if object_types:
        # An unseen object scores as an object of zero weight; one whose type was seen is better described by
        # its type's deviation from what the rest of the model says about its siblings' groundings (the roads
        # they drove, say), fading as the object's own evidence grows. Against the siblings' raw rate it
        # counted twice what the other tokens had already taken of their failures (a new bad van started at
        # 0.61-0.63 where its siblings failed 0.5).
        for i, obj in enumerate(args):
            kind = object_types.get(obj)
            if kind is None:
                continue
            if (i, kind) not in pooled:
                pooled[(i, kind)] = type_offset(model, i, by_type.get(kind, ()), prior_mean, prior_strength)
            offset = pooled[(i, kind)]
            if offset == 0.0:
                continue
            own = model.evidence.get(f"a{i}:{obj}")
            score += offset / (1.0 + (own[0] if own else 0.0))
    return 1.0 / (1.0 + math.exp(-max(min(score, 500.0), -500.0)))


def objects_by_type(object_types: Mapping[str, str] | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for obj, kind in (object_types or {}).items():
        out.setdefault(kind, []).append(obj)
    return out
