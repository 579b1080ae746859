"""`FailureModel`: per action name, the probability that a grounded action fails, learned from executed steps.

For each action name the model fits a logistic regression over sparse tokens (argument identities and
positions, object types, the step's features; see `learning.features`), Platt-calibrated by cross-validation
when there is enough data, and blends it with an optimistic Beta prior:

    p_fail = (N * p_classifier + prior_alpha) / (N + prior_alpha + prior_beta)
    N = n_grounding + transfer * (n_action - n_grounding)

where n_grounding is the recency-weighted number of steps of that very grounded action and n_action that of its
action name. Evidence is mostly the grounding's own: a search engine that failed 50 times says little about
another engine nobody tried, which keeps the optimistic prior (and so the agent keeps trying the alternative);
`transfer` lets a fraction of the siblings' evidence through. With few samples p_fail stays near the prior
mean (0.05 by default), so an action seen failing twice is not condemned forever (the CaseHub peer never tries an
action again once it is expensive; an optimistic prior keeps exploring). Below `min_samples`, or when only one
outcome was ever seen, the classifier is the action name's weighted failure rate, i.e. p_fail is the Beta
posterior mean. Recency: a step's weight halves every `half_life_steps` later steps of the same action name, so
a repaired action recovers after a run of successes; `half_life_steps=None` weighs all history equally.

Nothing here touches the database or trains at predict time: `predict_proba` uses compiled per-action weight
tables and is plain dictionary lookups plus one vectorised sigmoid per action name.
"""

from __future__ import annotations

import json
import warnings
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.calibration import CalibratedClassifierCV
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from domains.model import GroundAction
from learning.features import action_tokens, feature_tokens, interaction_tokens, step_tokens
from traces.records import StepRecord

RawRow = tuple[str, str, str, str]  # action, args JSON, features JSON, outcome: as stored in the steps table


@dataclass
class _ActionData:
    """The design matrix of one action name, built row by row in compact arrays."""

    vocab: dict[str, int] = field(default_factory=dict)
    indptr: array = field(default_factory=lambda: array("q", [0]))
    indices: array = field(default_factory=lambda: array("i"))
    values: array = field(default_factory=lambda: array("d"))
    y: array = field(default_factory=lambda: array("b"))
    order: array = field(default_factory=lambda: array("q"))  # global row number: the time axis
    cache: dict[Any, tuple[list[int], list[float]]] = field(default_factory=dict)

    def columns(self, tokens: Sequence[tuple[str, float]]) -> tuple[list[int], list[float]]:
        cols, vals = [], []
        vocab = self.vocab
        for token, value in tokens:
            col = vocab.get(token)
            if col is None:
                col = vocab[token] = len(vocab)
            cols.append(col)
            vals.append(value)
        return cols, vals

    def add(self, cols: list[int], vals: list[float], failed: bool, order: int) -> None:
        self.indices.extend(cols)
        self.values.extend(vals)
        self.indptr.append(len(self.indices))
        self.y.append(1 if failed else 0)
        self.order.append(order)

    def matrix(self) -> sparse.csr_matrix:
        return sparse.csr_matrix(
            (np.frombuffer(self.values, dtype=np.float64), np.frombuffer(self.indices, dtype=np.int32),
             np.frombuffer(self.indptr, dtype=np.int64)),
            shape=(len(self.y), max(len(self.vocab), 1)),
        )  # fmt: skip


@dataclass
class _Compiled:
    """What prediction needs for one action name."""

    weights: dict[str, float]  # token -> logistic coefficient (zeros left out)
    intercept: float
    calib_a: float  # Platt: p = 1 / (1 + exp(a * score + b)); identity is a=-1, b=0
    calib_b: float
    n_eff: float  # recency-weighted steps
    fail_eff: float  # recency-weighted failures
    grounding_eff: dict[str, float]  # "g:<args>" token -> recency-weighted steps of that grounding
    n_steps: int
    n_failures: int
    kind: str  # "beta", "logistic" or "logistic+sigmoid"


def _recency_weights(n: int, half_life: float | None) -> np.ndarray:
    if half_life is None or n == 0:
        return np.ones(n)
    age = np.arange(n - 1, -1, -1, dtype=np.float64)  # the newest step has age 0
    return np.power(0.5, age / float(half_life))


class FailureModel(BaseEstimator):
    """Probability that a grounded action fails, per action name (see the module docstring).

    prior_alpha, prior_beta: the optimistic Beta prior (mean alpha / (alpha + beta), default 0.05; its weight is
        alpha + beta pseudo-steps).
    min_samples: steps of an action name below which only the Beta posterior is used.
    half_life_steps: a step's weight halves every this many later steps of the same action name; None: no decay.
    C, max_iter: logistic regression's inverse L2 strength and iteration cap. The L2 penalty is a Gaussian prior
        on each token's weight. A trade-off, measured: a new grounding (new objects) failing twice among 3,000
        sibling steps gets p_fail 0.13 / 0.36 / 0.66 at C = 0.1 / 0.3 / 1 (ten failures: 0.54 / 0.75 / 0.86);
        on the evaluation benchmark (`python -m benchmarks.learning_eval`, seeds 0-2) C=0.1 reaches only 93-95%
        of the oracle's expected success in the last window, C=0.3 reaches 93-96% and halves cost-blind failures.
    transfer: the share of an action name's other groundings' evidence that counts for a grounding (0: each
        grounding learns alone; 1: all groundings of a name share their evidence).
    calibrate_min_samples: Platt-calibrate (shuffled 3-fold CalibratedClassifierCV) from this many steps of an
        action name, if each outcome occurs at least 20 times; None: never. Kept high because with few steps per
        grounding the held-out folds see unseen tokens and the fitted sigmoid flattens real signal (measured: 10
        failures in a row of one grounding came out at p_fail 0.003 calibrated, 0.58 uncalibrated).
    """

    def __init__(
        self,
        prior_alpha: float = 0.5,
        prior_beta: float = 9.5,
        min_samples: int = 20,
        half_life_steps: float | None = 1000.0,
        C: float = 0.3,
        max_iter: int = 200,
        calibrate_min_samples: int | None = 20_000,
        transfer: float = 0.1,
    ) -> None:
        self.prior_alpha = prior_alpha
        self.prior_beta = prior_beta
        self.min_samples = min_samples
        self.half_life_steps = half_life_steps
        self.C = C
        self.max_iter = max_iter
        self.calibrate_min_samples = calibrate_min_samples
        self.transfer = transfer

    # -- fitting ---------------------------------------------------------------------------------------------------

    def fit(
        self,
        records: Iterable[StepRecord],
        object_types: Mapping[str, str] | None = None,
        holdout_fraction: float = 0.0,
    ) -> "FailureModel":
        """Fit on steps in time order (oldest first). With `holdout_fraction` > 0 the newest fraction of steps is
        first held out to measure `holdout_metrics_` (log loss, Brier, AUC) of a model fit on the rest; the final
        model is then fit on everything."""
        data: dict[str, _ActionData] = {}
        n = 0
        for n, record in enumerate(records, start=1):
            table = data.get(record.action) or data.setdefault(record.action, _ActionData())
            tokens = step_tokens(record.args, record.features, object_types)
            table.add(*table.columns(tokens), record.failed, n - 1)
        return self._fit_data(data, n, holdout_fraction)

    def fit_rows(self, chunks: Iterable[Sequence[RawRow]], holdout_fraction: float = 0.0) -> "FailureModel":
        """Fit on raw `steps` rows (action, args JSON, features JSON, outcome) in chunks, oldest first: the
        streaming path `learning.retrain` uses for millions of steps. Identical rows are featurised once."""
        data: dict[str, _ActionData] = {}
        n = 0
        for chunk in chunks:
            for action, args_json, features_json, outcome in chunk:
                table = data.get(action)
                if table is None:
                    table = data[action] = _ActionData()
                key = (args_json, features_json)
                hit = table.cache.get(key)
                if hit is None:
                    args = tuple(json.loads(args_json))
                    features = json.loads(features_json) if features_json not in (None, "{}") else None
                    tokens = step_tokens(args, features)
                    hit = table.columns(tokens)
                    if len(table.cache) < 200_000:  # bounded: numeric features make most rows unique
                        table.cache[key] = hit
                table.add(hit[0], hit[1], outcome == "failure", n)
                n += 1
        return self._fit_data(data, n, holdout_fraction)

    def _fit_data(self, data: dict[str, _ActionData], n_rows: int, holdout_fraction: float) -> "FailureModel":
        self.holdout_metrics_: dict[str, Any] = {}
        if 0.0 < holdout_fraction < 1.0 and n_rows >= 10:
            cutoff = int(n_rows * (1.0 - holdout_fraction))
            self.holdout_metrics_ = self._holdout(data, cutoff)
        self.actions_: dict[str, _Compiled] = {}
        for name, table in data.items():
            X, y = table.matrix(), np.frombuffer(table.y, dtype=np.int8).astype(np.int64)
            self.actions_[name] = self._fit_action(X, y, table.vocab)[0]
        self.n_steps_ = n_rows
        for table in data.values():
            table.cache.clear()
        return self

    def _fit_action(
        self, X: sparse.csr_matrix, y: np.ndarray, vocab: Mapping[str, int]
    ) -> tuple[_Compiled, np.ndarray | None]:
        n, failures = len(y), int(y.sum())
        w = _recency_weights(n, self.half_life_steps)
        n_eff, fail_eff = float(w.sum()), float(w @ y) if n else 0.0
        grounding_cols = {token: col for token, col in vocab.items() if token.startswith("g:") and col < X.shape[1]}
        per_column = X.T @ w if n else np.zeros(X.shape[1])
        grounding_eff = {token: float(per_column[col]) for token, col in grounding_cols.items()}
        base = dict(n_eff=n_eff, fail_eff=fail_eff, n_steps=n, n_failures=failures, grounding_eff=grounding_eff)
        if n < self.min_samples or failures in (0, n):
            return _Compiled({}, 0.0, -1.0, 0.0, kind="beta", **base), None
        lr = LogisticRegression(C=self.C, max_iter=self.max_iter)
        a, b, kind = -1.0, 0.0, "logistic"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            enough = self.calibrate_min_samples is not None and n >= self.calibrate_min_samples
            if enough and min(failures, n - failures) >= 20:
                folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
                calibrated = CalibratedClassifierCV(lr, method="sigmoid", cv=folds, ensemble=False)
                calibrated.fit(X, y, sample_weight=w)
                inner = calibrated.calibrated_classifiers_[0]
                lr = inner.estimator
                a, b, kind = float(inner.calibrators[0].a_), float(inner.calibrators[0].b_), "logistic+sigmoid"
            else:
                lr.fit(X, y, sample_weight=w)
        coef = lr.coef_[0]
        weights = {token: float(coef[col]) for token, col in vocab.items() if col < len(coef) and coef[col] != 0.0}
        return _Compiled(weights, float(lr.intercept_[0]), a, b, kind=kind, **base), coef

    def _evidence(self, compiled: _Compiled, grounding_tokens: Sequence[str] | None) -> np.ndarray | float:
        """N in the blend: the grounding's own weighted steps plus `transfer` of its siblings'."""
        if grounding_tokens is None:
            return compiled.n_eff
        own = np.array([compiled.grounding_eff.get(token, 0.0) for token in grounding_tokens])
        return own + self.transfer * (compiled.n_eff - own)

    def _blend(
        self, compiled: _Compiled, p_classifier: np.ndarray | float, evidence: np.ndarray | float | None = None
    ) -> np.ndarray | float:
        n = compiled.n_eff if evidence is None else evidence
        return (n * p_classifier + self.prior_alpha) / (n + self.prior_alpha + self.prior_beta)

    def _classifier_proba(self, compiled: _Compiled, scores: np.ndarray) -> np.ndarray:
        if compiled.kind == "beta":
            rate = compiled.fail_eff / compiled.n_eff if compiled.n_eff > 0 else 0.0
            return np.full(len(scores), rate)
        return 1.0 / (1.0 + np.exp(np.clip(compiled.calib_a * scores + compiled.calib_b, -500, 500)))

    def _holdout(self, data: dict[str, _ActionData], cutoff: int) -> dict[str, Any]:
        """Fit on rows before `cutoff` (time order), predict the rest: honest metrics for a model of the past."""
        y_true: list[np.ndarray] = []
        p_pred: list[np.ndarray] = []
        for table in data.values():
            order = np.frombuffer(table.order, dtype=np.int64)
            train, test = order < cutoff, order >= cutoff
            if not test.any():
                continue
            X = table.matrix()
            y = np.frombuffer(table.y, dtype=np.int8).astype(np.int64)
            if train.any():
                compiled, coef = self._fit_action(X[train], y[train], table.vocab)
            else:
                compiled, coef = _Compiled({}, 0.0, -1.0, 0.0, 0.0, 0.0, {}, 0, 0, "beta"), None
            scores = X[test] @ coef + compiled.intercept if coef is not None else np.zeros(int(test.sum()))
            p_pred.append(self._blend(compiled, self._classifier_proba(compiled, scores)))
            y_true.append(y[test])
        if not y_true:
            return {}
        y_all, p_all = np.concatenate(y_true), np.clip(np.concatenate(p_pred), 1e-9, 1 - 1e-9)
        metrics: dict[str, Any] = {
            "heldout_steps": int(len(y_all)),
            "heldout_failure_rate": float(y_all.mean()),
            "log_loss": float(log_loss(y_all, p_all, labels=[0, 1])),
            "brier": float(brier_score_loss(y_all, p_all)),
            "auc": None,
        }
        if 0 < y_all.sum() < len(y_all):
            metrics["auc"] = float(roc_auc_score(y_all, p_all))
        return metrics

    # -- prediction ------------------------------------------------------------------------------------------------

    @property
    def prior_mean(self) -> float:
        return self.prior_alpha / (self.prior_alpha + self.prior_beta)

    def predict_proba(
        self,
        actions: Sequence[GroundAction],
        features: Mapping[str, Any] | None = None,
        object_types: Mapping[str, str] | None = None,
    ) -> np.ndarray:
        """p_fail for each grounded action (a 1-D array in the order given) in a situation described by
        `features` (the same keys the runtime reports with its steps). Unknown action names get the prior mean."""
        if not hasattr(self, "actions_"):
            raise RuntimeError("FailureModel is not fitted: call fit() or learning.retrain.load_latest() first")
        out = np.full(len(actions), self.prior_mean)
        groups: dict[str, list[int]] = {}
        for i, action in enumerate(actions):
            groups.setdefault(action.name, []).append(i)
        extra = feature_tokens(features)
        for name, positions in groups.items():
            compiled = self.actions_.get(name)
            if compiled is None:
                continue
            evidence = self._evidence(compiled, ["g:" + " ".join(actions[i].args) for i in positions])
            if compiled.kind == "beta":
                out[positions] = self._blend(compiled, self._classifier_proba(compiled, np.zeros(1))[0], evidence)
                continue
            weights = compiled.weights
            get = weights.get
            base = compiled.intercept + sum(get(token, 0.0) * value for token, value in extra)
            scores = np.empty(len(positions))
            for j, i in enumerate(positions):
                args = actions[i].args
                scores[j] = base + sum(get(t, 0.0) for t in action_tokens(args, object_types)) + sum(
                    get(t, 0.0) for t in interaction_tokens(args, features))
            out[positions] = self._blend(compiled, self._classifier_proba(compiled, scores), evidence)
        return out

    def action_counts(self) -> dict[str, dict[str, Any]]:
        """Per action name: steps and failures seen, and which estimator was fit."""
        return {
            name: {"steps": c.n_steps, "failures": c.n_failures, "kind": c.kind}
            for name, c in sorted(getattr(self, "actions_", {}).items())
        }

