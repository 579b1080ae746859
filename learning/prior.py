"""The prior model: a failure probability for any grounding, seen or not, from its tokens (`learning.features`).

One L2 logistic regression per action name over sparse tokens (argument identities per position, argument
pairs, an argument in a situation, object types, the step's features), so a grounding never tried gets the
failure rate of what it shares with those that were.

- `design(rows, vocab=None)`: the sparse design matrix of token rows, and the vocabulary it extended.
- `fit_logistic(X, n, f, C, anchor)`: the regression fit on aggregated counts (one weighted row per distinct
  step and outcome, each row capped at `CAP_STEPS` so one grounding tried 5,000 times does not set every
  untried one's rate), so a million steps over a few thousand distinct steps cost a few thousand rows. An empty
  row of `anchor` = (rate, pseudo-steps) anchors the intercept at the optimistic prior, so one bad grounding
  among few seen does not make every untried sibling look bad. None when only one outcome occurs.
- `out_of_fold(X, n, f, folds, C, fallback, strength)`: each row's prediction from a model that never saw its
  grounding (folds grouped by the grounding's arguments, `fold_of`): the shrinkage step needs a prior not
  already fit to the grounding's own counts, or it would count that evidence twice and fit too strong a prior.

Why a logistic regression and not gradient-boosted trees, and what was measured: docs/decisions/prior-model.md.
"""

from __future__ import annotations

import functools
import warnings
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse

from learning.features import Token
from learning.raw_cells import ragged, unique

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import ThreadpoolController

FOLDS = 3
# The prior models the population of groundings, not of steps: one grounding tried 5,000 times must not set the
# rate every untried grounding starts from, so a row weighs at most this many steps (its own counts still decide
# its own estimate, in `learning.shrinkage`).
CAP_STEPS = 10.0


def design(
    rows: Sequence[Sequence[Sequence[Token]]], vocab: dict[str, int] | None = None
) -> tuple[sparse.csr_matrix, dict]:
    """Sparse design matrix of rows, each a sequence of token lists (parts) whose tokens are concatenated; new
    tokens extend `vocab` (a fresh one when None). A part object seen before (`RowParser` shares them) is mapped
    to columns once."""
    vocab = {} if vocab is None else vocab
    indptr, indices, values = [0], [], []
    seen: dict[int, tuple[list[int], list[float]]] = {}
    for parts in rows:
        for part in parts:
            hit = seen.get(id(part))
            if hit is None:
                cols = []
                for token, _ in part:
                    col = vocab.get(token)
                    if col is None:
                        col = vocab[token] = len(vocab)
                    cols.append(col)
                hit = seen[id(part)] = (cols, [value for _, value in part])
            indices.extend(hit[0])
            values.extend(hit[1])
        indptr.append(len(indices))
    matrix = sparse.csr_matrix(
        (np.asarray(values, float), np.asarray(indices, np.int64), np.asarray(indptr)),
        shape=(len(rows), max(len(vocab), 1)),
    )
    return matrix, vocab


def design_parts(
    parts: Sequence[tuple[np.ndarray, Sequence[Sequence[Token]]]], n_rows: int
) -> tuple[sparse.csr_matrix, dict[str, int]]:
    """`design` of `n_rows` rows given by number: each of `parts` is (each row's part number, the token lists by
    number), a row's tokens being its parts' lists in turn. The same matrix and vocabulary (columns numbered as
    the tokens first occur) as `design` of the rows spelt out, each distinct part read once and the rows
    assembled by numpy, not token by token."""
    columns: dict[str, int] = {}
    source_columns: list[int] = []
    source_values: list[float] = []
    starts, lengths = [], []
    for numbers, table in parts:
        sizes = np.array([len(part) for part in table], dtype=np.int64)
        first = np.cumsum(sizes) - sizes + len(source_columns)
        source_columns.extend(columns.setdefault(token, len(columns)) for part in table for token, _ in part)
        source_values.extend(value for part in table for _, value in part)
        starts.append(first[numbers])
        lengths.append(sizes[numbers])
    segment_start = np.stack(starts, axis=1).reshape(-1)  # row by row, each row's parts in turn
    segment_length = np.stack(lengths, axis=1).reshape(-1)
    indptr = np.concatenate(([0], np.cumsum(np.stack(lengths, axis=1).sum(axis=1)))).astype(np.int64)
    at = ragged(segment_start, segment_length)
    found = np.asarray(source_columns, np.int64)[at]
    values = np.asarray(source_values, float)[at]
    distinct, first_at, _ = unique(found)
    in_order = distinct[np.argsort(first_at)]
    renumber = np.zeros(len(columns), dtype=np.int64)
    renumber[in_order] = np.arange(len(in_order))
    names = list(columns)
    vocab = {names[c]: i for i, c in enumerate(in_order.tolist())}
    matrix = sparse.csr_matrix((values, renumber[found], indptr), shape=(n_rows, max(len(vocab), 1)))
    return matrix, vocab


def capped(n: np.ndarray, f: np.ndarray, cap: float = CAP_STEPS) -> tuple[np.ndarray, np.ndarray]:
    """Rows' counts scaled down to at most `cap` steps each, their failure rates kept."""
    scale = np.minimum(1.0, cap / np.maximum(n, 1e-12))
    return n * scale, f * scale


def fit_logistic(
    X: sparse.csr_matrix,
    n: np.ndarray,
    f: np.ndarray,
    C: float,
    anchor: tuple[float, float],
    cap: float = CAP_STEPS,
    max_iter: int = 300,
) -> LogisticRegression | None:
    """Logistic regression on aggregated counts: each row twice, as a failure weighing f and a success weighing
    n - f, a row's weight capped at `cap` steps, plus an empty row of `anchor` = (rate, steps) pseudo-steps.
    None when only one outcome occurs (nothing to separate)."""
    n, f = capped(n, f, cap)
    n, f = np.append(n, anchor[1]), np.append(f, anchor[0] * anchor[1])
    ok = n - f
    if f.sum() <= 1e-12 or ok.sum() <= 1e-12:
        return None
    # the rows as failures, then as successes, each where its weight is not 0: one selection of X's rows (and
    # the anchor's empty row after them), no stacked copy
    X = sparse.csr_matrix((X.data, X.indices, np.append(X.indptr, X.indptr[-1])), shape=(X.shape[0] + 1, X.shape[1]))
    failing, succeeding = np.flatnonzero(f > 1e-12), np.flatnonzero(ok > 1e-12)
    rows = X[np.concatenate([failing, succeeding])]
    y = np.concatenate([np.ones(len(failing)), np.zeros(len(succeeding))])
    w = np.concatenate([f[failing], ok[succeeding]])
    # liblinear: 3x faster than lbfgs on these small sparse problems (measured: 9 vs 30 ms for 400 rows x 600
    # tokens); it penalises the intercept too, which intercept_scaling=10 makes 100x weaker. One BLAS thread:
    # on a loaded 2-core machine a threaded fit of this size took 0.5 s instead of 0.03 s.
    # imported here: prediction never fits, and scikit-learn takes ~1.5 s to import (`learning.model`)
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, solver="liblinear", intercept_scaling=10.0, max_iter=max_iter)
    with warnings.catch_warnings(), _thread_pools().limit(limits=1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(rows, y, sample_weight=w)
    return model


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The BLAS and OpenMP pools loaded, found once: `threadpool_limits` looks for them on every call, which
    costs as much as a small fit, and `fit_logistic` runs hundreds of times in a retrain."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def fold_of(group: str) -> int:
    return zlib.crc32(group.encode()) % FOLDS


def out_of_fold(
    X: sparse.csr_matrix, n: np.ndarray, f: np.ndarray, folds: np.ndarray, C: float, fallback: float, strength: float
) -> np.ndarray:
    """Each row's prediction by a model fit on the other folds (`folds`: each row's `fold_of` its group, so
    rows of one group share a fold). A fold whose training part has one outcome only gets that part's failure
    rate smoothed towards `fallback` with `strength` pseudo-steps."""
    q = np.full(len(n), fallback)
    for k in range(FOLDS):
        test = folds == k
        if not test.any():
            continue
        train = ~test
        model = fit_logistic(X[train], n[train], f[train], C, (fallback, strength)) if train.any() else None
        if model is None:
            seen_n, seen_f = n[train].sum(), f[train].sum()
            q[test] = (seen_f + strength * fallback) / (seen_n + strength)
        else:
            q[test] = model.predict_proba(X[test])[:, 1]
    return q
