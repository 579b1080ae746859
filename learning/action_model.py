"""One action name's part of the failure model: `ActionModel` (plain data, stored as JSON), how it is fitted,
and the token prior it gives a grounding.

Its own file because fitting one action name is the whole of the estimator's statistics (the token prior,
out-of-fold priors, shrinkage, the outlier mixture, situations), while `learning.model.FailureModel` is the
estimator around it: parameters, streaming counts, hold-out scores and prediction. See `learning.model`'s
docstring for the design and its measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse

from learning.counts import CellTable, kin_key
from learning.families import token_scales
from learning.features import RowParser, step_tokens, unit_weight
from learning.prior import capped, design_parts, fit_logistic, fold_of, out_of_fold
from learning.raw_cells import ParsedCells, first_seen, parse_cells, ragged
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
    # the weight staleness left its evidence] (`learning.counts.CellTable`)
    recent: dict[str, list[float]] = field(default_factory=dict)
    last_seen: dict[str, str] = field(default_factory=dict)  # cell -> its newest step's timestamp, where recorded
    # kin key -> [probability that it shares a sibling's change, steps, failures of the change's common rate]
    # (`learning.siblings`), for the kin groups that may share one
    shared: dict[str, list[float]] = field(default_factory=dict)


def fit_action(
    table: CellTable,
    parser: RowParser,
    *,
    prior_mean: float,
    prior_strength: float,
    min_samples: int,
    C: float,
    outliers: bool,
) -> ActionModel:
    """One action name's `ActionModel` from its cells' recency-weighted counts (`learning.counts`): the token
    prior (or the groundings' population rate), each cell's out-of-fold prior, m and the outlier mixture, as
    `learning.model`'s docstring says; the parameters are `FailureModel`'s.

    A raw cell (one arguments text and features text) is parsed once per distinct text and its sums are
    numpy's (`np.bincount` adds in the cells' order, as a loop over them would), so a million raw cells cost
    array passes, not a million Python iterations."""
    rows = parse_cells(table.args, table.features, table.args_texts, table.features_texts, parser)
    stats = table.stats
    n_w, f_w = stats[:, 0], stats[:, 1]
    steps, failures = int(stats[:, 2].sum()), int(stats[:, 3].sum())
    mu0, s0 = prior_mean, prior_strength
    n_cap, f_cap = capped(n_w, f_w)  # the prior models groundings, not steps: see learning.prior
    base_rate = (f_cap.sum() + s0 * mu0) / (n_cap.sum() + s0)
    model = None
    if steps >= min_samples and 0 < failures < steps:
        X, vocab = design_parts(rows.parts, len(table))
        scales = token_scales(X, vocab, n_w, f_w, C, (mu0, s0))
        X = (X @ sparse.diags(scales)).tocsr()  # a scale is its weight's prior standard deviation
        model = fit_logistic(X, n_w, f_w, C, (mu0, s0))
    if model is not None:
        # folds by kin group: a cell's prior must not have seen the grounding's mirror (the same objects in
        # another order), or a truck's bad road tried both ways is 'explained' by its own other half and the
        # outlier share below counts it as a member
        folds = np.array([fold_of(kin_key(name)) for name in rows.groundings], dtype=np.int64)[rows.grounding]
        q = out_of_fold(X, n_w, f_w, folds, C, fallback=mu0, strength=s0)
        coef = model.coef_[0]
        weights = {
            t: unit_weight(t, float(coef[c] * scales[c]), parser.object_value)
            for t, c in vocab.items()
            if c < len(coef) and coef[c] != 0.0
        }
        action = ActionModel("logistic", s0, float(base_rate), float(model.intercept_[0]), weights)
    else:
        base_rate, q = population_rate(rows.grounding, n_w, f_w, prior_mean, prior_strength)
        action = ActionModel("rate", s0, base_rate)
    full = model.predict_proba(X)[:, 1] if model is not None else np.full(len(table), base_rate)
    record_cells(action, table, rows, q, full, mu0)
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


def record_cells(
    action: ActionModel, table: CellTable, rows: ParsedCells, prior: np.ndarray, predicted: np.ndarray, mu0: float
) -> None:
    """`action`'s per-cell, per-token and per-grounding records from its raw cells (`table`, parsed as `rows`),
    each raw cell's `prior` (out of fold) and `predicted` (by the full token model) given: `cells` [weighted
    steps, weighted failures, their prior (weight-averaged over the raw cells: numeric features split a cell),
    steps, failures], `evidence`, `groundings` [weighted steps, weighted failures, the model's weight-averaged
    prediction], `recent` and `last_seen`, each keyed in the order first met. A weight-average of nothing is
    `mu0`."""
    stats = table.stats
    n_w, f_w = stats[:, 0], stats[:, 1]
    size, cell = len(rows.cell_keys), rows.cell
    sums = [np.bincount(cell, weights=w, minlength=size) for w in (n_w, f_w, prior * n_w, stats[:, 2], stats[:, 3])]
    sums[2] = np.divide(sums[2], sums[0], out=np.full(size, float(mu0)), where=sums[0] > 0)
    action.cells = dict(zip(rows.cell_keys, np.column_stack(sums).tolist()))
    _keep_recent(action, table, rows)
    action.shared = _shared(table, rows)
    action.evidence = _evidence(rows, n_w, f_w)
    size, grounding = len(rows.groundings), rows.grounding
    seen = [np.bincount(grounding, weights=w, minlength=size) for w in (n_w, f_w, predicted * n_w)]
    seen[2] = np.divide(seen[2], seen[0], out=np.full(size, float(mu0)), where=seen[0] > 0)
    action.groundings = dict(zip(rows.groundings, np.column_stack(seen).tolist()))


def _evidence(rows: ParsedCells, n_w: np.ndarray, f_w: np.ndarray) -> dict[str, list[float]]:
    """Per argument-position token ("a<i>:<obj>"), the weighted steps and failures of the raw cells with that
    object in that position, tokens in the order first met (raw cell by raw cell, position by position)."""
    names: dict[str, int] = {}
    per_args = [
        [names.setdefault(f"a{i}:{obj}", len(names)) for i, obj in enumerate(args)] for args, _, _ in rows.parsed_args
    ]
    sizes = np.array([len(tokens) for tokens in per_args], dtype=np.int64)
    flat = np.array([t for tokens in per_args for t in tokens], dtype=np.int64)
    counts = sizes[rows.args_of]
    token, order = first_seen(flat[ragged((np.cumsum(sizes) - sizes)[rows.args_of], counts)])
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), counts)  # each entry's raw cell
    sums = [np.bincount(token, weights=w[owner], minlength=len(order)) for w in (n_w, f_w)]
    token_names = list(names)
    return dict(zip([token_names[t] for t in order.tolist()], np.column_stack(sums).tolist()))


def _shared(table: CellTable, rows: ParsedCells) -> dict[str, list[float]]:
    """The kin groups that may share a sibling's change (`CellTable.shared`), by kin key."""
    if table.shared is None:
        return {}
    keys, cell = rows.cell_keys, rows.cell
    return {
        kin_key(keys[cell[i]].partition("|")[0]): table.shared[i].tolist()
        for i in np.flatnonzero(table.shared[:, 0] > 0).tolist()
    }


def _keep_recent(action: ActionModel, table: CellTable, rows: ParsedCells) -> None:
    """The raw cells' records of what their evidence rests on (`CellTable`) into their cells'
    `action.recent` and `action.last_seen`: steps and failures since the last change summed over the raw cells
    that make one cell (numeric features split a cell's rows), the fewest runs since last seen, the most
    changes (its kin group's count, on every raw cell alike) and the most weight staleness left."""
    size, cell = len(rows.cell_keys), rows.cell
    since = np.bincount(cell, weights=table.since_change, minlength=size).astype(np.int64)
    failures_since = np.bincount(cell, weights=table.failures_since, minlength=size).astype(np.int64)
    runs_ago = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(runs_ago, cell, table.runs_ago)
    changes = np.full(size, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(changes, cell, table.changes)
    staleness = np.full(size, -np.inf)
    np.maximum.at(staleness, cell, table.staleness)
    action.recent = {
        key: [a, b, c, d, e]
        for key, a, b, c, d, e in zip(
            rows.cell_keys, since.tolist(), failures_since.tolist(), runs_ago.tolist(), changes.tolist(),
            staleness.tolist(),
        )
    }  # fmt: skip
    if table.last_seen is not None:
        keys, newest = rows.cell_keys, action.last_seen
        for number, stamp in zip(cell.tolist(), table.last_seen):
            if stamp is not None and stamp > newest.get(keys[number], ""):
                newest[keys[number]] = stamp


def unseen_rate(tables: Mapping[str, CellTable], prior_mean: float, prior_strength: float) -> float:
    """The failure rate of an action name never recorded: the population mean of the recorded action names'
    rates (`learning.shrinkage.population_means`, each name's weighted steps and failures one member), so an
    agent whose recorded steps all succeeded is not told that every action it has not run yet fails
    `prior_mean` of the time."""
    if not tables:
        return float(prior_mean)
    n = np.array([sum(table.stats[:, 0].tolist()) for table in tables.values()], dtype=float)
    f = np.array([sum(table.stats[:, 1].tolist()) for table in tables.values()], dtype=float)
    return float(population_means(n, f, prior_mean, prior_strength)[0])


def population_rate(
    groups: np.ndarray, n_w: np.ndarray, f_w: np.ndarray, prior_mean: float, prior_strength: float
) -> tuple[float, np.ndarray]:
    """Without a token model: the rate a grounding never tried starts from, and each row's prior (that of
    its grounding with the grounding itself left out), by `learning.shrinkage.population_means`: the
    groundings' rates are a population of unknown spread, so one grounding's failures are mostly its own
    until another grounding repeats them. `groups`: each row's grounding, numbered 0, 1, ... as first met."""
    rows = np.asarray(groups, dtype=np.int64)
    size = int(rows.max()) + 1 if len(rows) else 0
    own_n = np.bincount(rows, weights=n_w, minlength=size)
    own_f = np.bincount(rows, weights=f_w, minlength=size)
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
