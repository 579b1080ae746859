"""A grounding across situations: the middle level of `learning.model`'s hierarchy (situation cell <- grounding
<- token prior).

A grounding's own counts are kept per situation (its categorical features), so that "this engine fails at peak
hours" is not averaged with its quiet hours. The price is that a situation a grounding was never seen in starts
from the prior alone, which never saw the grounding: a drive that failed 5 of 7 times in the sun started in the
rain at the rate of drives in general (the costed world's worst seed chose it again and again). Here its record
in the other situations moves that start: the prior is shifted (in log-odds) by how far the record lies from what
the prior expected there (`grounding_offset`), and mixed with the grounding's own rate when the record makes it
an outlier (`learning.shrinkage.outlier_weights`). `borrow_across_situations` does the same at fitting time for
the situation cells that do have counts, each from its siblings' records.

Whether a grounding's situations are pooled is decided per action name (`fit_situation_weight`): rho = 1 or 0,
whichever gives the cells' counts the higher beta-binomial likelihood when each cell's prior gets
m + rho * n_other pseudo-steps (n_other: the grounding's recency-weighted steps in its other situations).
- rho = 1 pools them: a cell's estimate is its grounding's, from all its steps, the situation entering only
  through the prior (the token model's argument-in-situation tokens, and the shift above); how much groundings
  differ (m) and which are outliers are fitted over groundings as wholes (`pooled_by_grounding`), and a
  grounding's whole record says whether it is an outlier in every situation.
- rho = 0 keeps each situation's counts apart, as before: where a situation does change a grounding's rate
  beyond what the prior says (a drive bad in the rain only), pooling would average it away.
Why: with every situation apart, a feature that changes nothing halved the evidence on every grounding, and m
and the outlier share were fitted on half-records. On one `vehicle-roads` world's traces (seed 202, 160
episodes; a truck's bad roads fail 70% whatever the weather) the bad drives the learner had tried (a median 3
times) were priced at a median 0.35, and 0.50 by the same model fitted without the feature (m 10 -> 4.6, outlier
share 0.09 -> 0.19); pooled, 0.50 with the feature. Closed loop the learned arm reached 0.95 of the oracle in 6
of 10 worlds (seeds 200-209), and in 10 of 10 when the same worlds were played without the feature. A grid over
rho in [0, 1] picked 0.2 where the drives were bad in the rain only, and pricing the sun at 0.34-0.38 (true 0);
the two-point choice keeps them apart (`tests/test_learning_estimator.py`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from learning.shrinkage import BROAD, INFORMATIVE_STEPS, _log_bb, outlier_weights

# What `fit_situation_weight` chooses between: a grounding's steps in its other situations count as its own
# steps here (1) or not at all (0). A finer grid let a half-pooled fit price a drive's safe weather by its bad one.
_RHO_GRID = np.array([0.0, 1.0])


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


def grounding_offset(n: float, f: float, expected: float, strength: float) -> float:
    """How far (log-odds) a grounding's record elsewhere, shrunk towards what the prior expected there
    (`strength` pseudo-steps), lies from that expectation: what its prior in another situation is shifted by."""
    if n <= 1e-9:
        return 0.0
    return logit((f + strength * expected) / (n + strength)) - logit(expected)


def from_elsewhere(prior: float, seen: Sequence[float], strength: float, outlier_share: float) -> float:
    """The prior of a grounding in a situation it was never seen in, given its record in the others
    (`seen` = [n, f, what the prior expected there]): shifted by `grounding_offset`, and if that record makes it
    an outlier to the prior's population (`strength` m, `outlier_share`), mixed with its own smoothed rate."""
    n, f, expected = seen
    shifted = _shifted(prior, grounding_offset(n, f, expected, strength))
    if outlier_share <= 0.0 or n <= 1e-9:
        return shifted
    r = float(outlier_weights(np.array([n]), np.array([f]), np.array([expected]), strength, outlier_share)[0])
    return (1.0 - r) * shifted + r * (f + BROAD[0]) / (n + BROAD[0] + BROAD[1])


def _shifted(p: float, offset: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(logit(p) + offset, 500.0), -500.0)))


def borrow_across_situations(cells: dict[str, list[float]], strength: float) -> bool:
    """Shift each cell's out-of-fold prior by its grounding's record in its other situations
    (`grounding_offset`), in place: the prior never saw the grounding, so a drive that failed 5 of 7 times in
    the sun would otherwise start in the rain at the rate of drives in general. True if any cell moved."""
    by_grounding: dict[str, list[list[float]]] = {}
    for key, cell in cells.items():
        by_grounding.setdefault(key.partition("|")[0], []).append(cell)
    shifts = []
    for group in by_grounding.values():
        if len(group) < 2:
            continue
        n_all = sum(c[0] for c in group)
        f_all = sum(c[1] for c in group)
        q_all = sum(c[0] * c[2] for c in group)
        for cell in group:
            n_other = n_all - cell[0]
            if n_other <= 1e-9:
                continue
            expected = (q_all - cell[0] * cell[2]) / n_other
            shifts.append((cell, grounding_offset(n_other, f_all - cell[1], expected, strength)))
    for cell, offset in shifts:  # after all offsets are computed: each from the others' original priors
        cell[2] = _shifted(cell[2], offset)
    return bool(shifts)


def other_steps(cells: dict[str, list[float]]) -> dict[str, float]:
    """Per cell key ("args|situation"): the grounding's recency-weighted steps in its other situations."""
    totals: dict[str, float] = {}
    for key, cell in cells.items():
        grounding = key.partition("|")[0]
        totals[grounding] = totals.get(grounding, 0.0) + cell[0]
    return {key: totals[key.partition("|")[0]] - cell[0] for key, cell in cells.items()}


def fit_situation_weight(cells: dict[str, list[float]], strength: float, outlier_share: float) -> float:
    """rho (module docstring): 1 (a grounding's situations pooled) or 0 (kept apart), whichever maximises the
    cells' likelihood under the mixture (`learning.shrinkage`) with cell priors Beta(s q, s (1 - q)),
    s = `strength` + rho * n_other. 0 unless three cells with steps of their own also have informative steps
    elsewhere: fewer cannot tell."""
    others = other_steps(cells)
    rows = [(c[0], c[1], c[2], others[k]) for k, c in cells.items() if c[0] > 1e-9 and others[k] > 1e-9]
    if sum(1 for n, _, _, o in rows if n > INFORMATIVE_STEPS and o > INFORMATIVE_STEPS) < 3:
        return 0.0
    n, f, q, o = (np.array(column, dtype=float) for column in zip(*rows))
    f = np.minimum(f, n)
    q = np.clip(q, 1e-4, 1.0 - 1e-4)
    s = strength + _RHO_GRID[:, None] * o[None, :]  # (rho, cells)
    member = _log_bb(n, f, s * q, s * (1.0 - q))
    if outlier_share > 0.0:
        broad = _log_bb(n, f, *BROAD)
        member = np.logaddexp(np.log1p(-outlier_share) + member, np.log(outlier_share) + broad)
    return float(_RHO_GRID[int(np.argmax(member.sum(axis=1)))])


def pooled_by_grounding(
    cells: dict[str, list[float]], priors: dict[str, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Per grounding, its cells' steps and failures summed and their `priors` (each cell's own, before any
    borrowing) averaged by steps: (n, f, q) arrays, the rows a fit over groundings as wholes takes, and the
    groundings in their order."""
    totals: dict[str, list[float]] = {}
    for key, cell in cells.items():
        row = totals.setdefault(key.partition("|")[0], [0.0, 0.0, 0.0])
        row[0] += cell[0]
        row[1] += cell[1]
        row[2] += cell[0] * priors[key]
    rows = np.array(list(totals.values()), dtype=float).reshape(-1, 3)
    q = np.divide(rows[:, 2], rows[:, 0], out=np.full(len(rows), 0.05), where=rows[:, 0] > 0)
    return rows[:, 0], rows[:, 1], q, list(totals)
