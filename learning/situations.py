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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from learning.shrinkage import BROAD, outlier_weights


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
