"""`FailureModel`: per action name, the probability that a grounded action fails, learned from executed steps.

The planner prices each step by its p_fail, so plans route around what fails where. Per action name, a
grounding's p_fail mixes its own record with a prior (empirical Bayes; `learning.shrinkage`, `learning.prior`):

    p_fail(g) = (f_g + m * prior(g)) / (n_g + m)

- f_g, n_g: the grounding's failures and steps in its situation (the categorical features), since its rate last
  changed (`learning.changes`, or a break the groundings alike but for one object showed together:
  `learning.siblings`) and aged by recency and staleness (`learning.counts`);
- prior(g): a logistic model over argument, pair, type and object-in-situation tokens (`learning.families`), so
  a grounding never tried gets the failure rate of what it shares with those that were; out-of-fold for a
  grounding with counts, so its own evidence is not counted twice. An action name with fewer than
  `min_samples` steps or one outcome only has no token model: its prior is the population mean;
- m: the prior's strength per action name, fit as a mixture of the population and outliers grouped by kin (a
  grounding in every situation and its mirrors); a situation a grounding was never seen in, or has no step in
  since its last change (it broke in the rain, and the sun has not been seen since), borrows from its record
  in the others;
- a change of rate that a grounding alike but for one object showed (a road that broke for another van) is
  mixed in with the probability that g shares it (`learning.siblings`), so the plans leave what broke for one
  before it has failed for every other.

Consistent: as a grounding's evidence grows, p_fail tends to its own (recency-weighted) rate, and from
`trust_steps` weighted steps on stays within `tolerance` of it, but for the share in a sibling's change, which its
own steps since that change settle. With little data the optimistic `prior_mean`
(0.05 over `prior_strength` pseudo-steps) stands in. An untried sibling of a grounding that keeps failing keeps
a bounded prior, so it is tried within a bounded number of calls.

Object types given to `fit` are learned as `t<i>:<type>` tokens. The trace store does not keep types, so at
prediction an object never seen in position i also gets the log-odds of its type's pooled failure rate there
(over the action's rate): a new truck of a bad model starts pessimistic.

Entry points:
- `FailureModel(...).fit(records, object_types=None)` (`StepRecord`s, oldest first) or `fit_rows(chunks)` (raw
  `steps` rows, streamed): returns the fitted model, with `durations_` (`learning.durations`) beside it.
- `predict_proba(actions, features=None, object_types=None)`: posterior mean p_fail, a 1-D array in the order
  given; `predict_posterior` adds each grounding's concentration (n_g + m pseudo-steps), what
  `learning.explore` prices from; `predict_tried` and `predict_evidence` say what an estimate rests on. Unknown
  action names get the optimistic prior. Every `predict_*` raises `RuntimeError` on an unfitted model.

Nothing here touches the database; prediction is dictionary lookups plus a vectorised sigmoid. Models are stored
as JSON (`learning.storage`), never pickled. Why kin-group outliers, half-weight situation tokens and bounded
sibling priors, and what was measured: docs/decisions/failure-model.md.

    model = FailureModel().fit(store.iter_steps())
    p_fail = model.predict_proba(ground_actions, features={"hour": "peak"})
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from domains.model import GroundAction
from learning.action_model import ActionModel, fit_action, objects_by_type, token_prior, unseen_rate
from learning.changes import DEFAULT_CHANGE_ODDS
from learning.counts import DEFAULT_STALE_HALF_LIFE, Counts, columns, kin_key
from learning.durations import TimeModel
from learning.features import OBJECT_VALUE, RowParser, situation_key
from learning.params import Params
from learning.shrinkage import posterior
from learning.siblings import mixed
from learning.situations import from_elsewhere
from traces.records import StepRecord

# action, args JSON, features JSON, outcome[, run id[, timestamp]]: as stored in the steps table
RawRow = tuple[Any, ...]


class FailureModel(Params):
    """Probability that a grounded action fails, per action name (see the module docstring).

    A scikit-learn estimator by its conventions (`learning.params.Params`: parameters in `__init__`,
    `get_params`/`set_params`; fitted state in trailing-underscore attributes; `fit`/`predict_proba`), not by
    subclassing `BaseEstimator`, so scikit-learn loads only when a model is fit.

    half_life_steps: a step's weight halves every this many later steps of the same action name; None: no decay.
        Long (5000), because the consistency band counts weighted steps (docs/decisions/failure-model.md).
    prior_mean, prior_strength: the optimistic prior for action names with little data (mean, pseudo-steps);
        prior_strength is also m for an action name with fewer than three groundings seen.
    min_samples: steps of an action name below which the prior is its smoothed rate, not the token model.
    C: the token model's inverse L2 strength (per weighted step).
    stale_half_life: how many of a grounding's usual gaps between visits halve its evidence when they pass without
        a visit, so that what the plans avoid drifts back to its prior and is tried again (`learning.counts`);
        None: evidence never goes stale.
    change_odds: the odds (change against none) at which a grounding's record is cut where its rate changed
        (`learning.changes`); None: never cut.
    tolerance, trust_steps: from trust_steps weighted steps of a grounding on, p_fail stays within tolerance of
        its own observed rate (the consistency guarantee; see `learning.shrinkage`). 25 weighted steps, so that
        30 recorded ones are within the band (docs/decisions/failure-model.md).
    """

    durations_: TimeModel | None  # expected durations and failure kinds (`learning.durations`), fit beside
    unseen_rate_: float | None  # p_fail of an action name never recorded (None: `prior_mean`)

    def __init__(
        self,
        half_life_steps: float | None = 5000.0,
        prior_mean: float = 0.05,
        prior_strength: float = 10.0,
        min_samples: int = 20,
        C: float = 1.0,
        tolerance: float = 0.05,
        trust_steps: float = 25.0,
        outliers: bool = True,
        stale_half_life: float | None = DEFAULT_STALE_HALF_LIFE,
        change_odds: float | None = DEFAULT_CHANGE_ODDS,
    ) -> None:
        self.half_life_steps = half_life_steps
        self.prior_mean = prior_mean
        self.prior_strength = prior_strength
        self.min_samples = min_samples
        self.C = C
        self.tolerance = tolerance
        self.trust_steps = trust_steps
        self.outliers = outliers
        self.stale_half_life = stale_half_life
        self.change_odds = change_odds

    # -- fitting ---------------------------------------------------------------------------------------------------

    def fit(
        self,
        records: Iterable[StepRecord],
        object_types: Mapping[str, str] | None = None,
        holdout_fraction: float = 0.0,
    ) -> FailureModel:
        """Fit on steps in time order (oldest first); see `fit_rows`. Also fits `durations_`, the expected
        durations and failure kinds (`learning.durations`)."""
        records_list = list(records)
        rows = [
            (
                r.action,
                json.dumps(list(r.args), separators=(",", ":")),
                json.dumps(r.features, separators=(",", ":"), sort_keys=True),
                r.outcome,
                r.run_id,
                r.timestamp.isoformat().replace("+00:00", "Z") if r.timestamp else None,
            )
            for r in records_list
        ]
        self.fit_rows([rows], holdout_fraction, total_rows=len(rows), object_types=object_types)
        timed = [
            (*row[:4], r.failure_category, r.duration_ms, r.side_effects, r.run_id)
            for row, r in zip(rows, records_list)
        ]
        self.durations_ = self.time_model().fit_rows([timed])
        return self

    def time_model(self) -> TimeModel:
        """An unfitted `learning.durations.TimeModel` with this model's recency, strength and consistency band."""
        return TimeModel(self.half_life_steps, self.prior_strength, self.tolerance, self.trust_steps)

    def fit_rows(
        self,
        chunks: Iterable[Sequence[RawRow]],
        holdout_fraction: float = 0.0,
        total_rows: int | None = None,
        object_types: Mapping[str, str] | None = None,
    ) -> FailureModel:
        """Fit on raw `steps` rows (action, args JSON, features JSON, outcome[, run id[, timestamp]]) in chunks,
        oldest first: the streaming path `learning.retrain` uses for millions of steps. Runs are the clock
        staleness counts in (`learning.counts`); a row without a run id is a run of its own. With
        `holdout_fraction` > 0 the newest fraction of steps (of `total_rows`) also measures `holdout_metrics_`
        (log loss, Brier, AUC) of a model fit on the older ones; the model kept is fit on everything."""
        holdout = 0.0 < holdout_fraction < 1.0
        if holdout and total_rows is None:
            chunks = [[row for chunk in chunks for row in chunk]]
            total_rows = len(chunks[0])
        cutoff = int((total_rows or 0) * (1.0 - holdout_fraction)) if holdout else -1
        everything = self._counts()
        older = everything.snapshot() if cutoff == 0 else None
        n = 0
        for chunk in chunks:
            if not chunk:
                continue
            actions, args, features, outcomes, runs, stamps = columns(chunk, 6)  # run id, timestamp: None if missing
            if None in features or "" in features:
                features = [text or "{}" for text in features]
            failed = bytes([outcome == "failure" for outcome in outcomes])
            split = cutoff - n if 0 < cutoff - n < len(chunk) else len(chunk)
            for part in (slice(0, split), slice(split, None)):
                if part.start == len(chunk):
                    continue
                everything.add_rows(actions[part], args[part], features[part], failed[part], runs[part], stamps[part])
                n += len(actions[part])
                if n == cutoff:
                    older = everything.snapshot()
        self.holdout_metrics_: dict[str, Any] = {}
        self.durations_ = None  # `fit` and `learning.retrain` fit it beside
        parser = RowParser(object_types, OBJECT_VALUE)
        if holdout and n >= 10 and older is not None and n > cutoff:
            newer = {(action, key): [steps, failures] for action, key, steps, failures in everything.tally(cutoff)}
            self._fit_counts(older.finish(), parser)
            del older
            self.holdout_metrics_ = self._score(newer, parser, object_types)
        self._fit_counts(everything.finish(), parser)
        self.n_steps_ = n
        return self

    def _counts(self) -> Counts:
        return Counts(self.half_life_steps, self.stale_half_life, self.change_odds)

    def _fit_counts(self, counts: Counts, parser: RowParser) -> None:
        """Fit every action name's model, the rate of action names never recorded, and what aged the evidence."""
        for memo in ("_prior_memo", "_posterior_memo"):
            self.__dict__.pop(memo, None)
        params = {
            name: getattr(self, name) for name in ("prior_mean", "prior_strength", "min_samples", "C", "outliers")
        }
        self.actions_ = {name: fit_action(table, parser, **params) for name, table in counts.tables.items()}
        self.unseen_rate_ = unseen_rate(counts.tables, self.prior_mean, self.prior_strength)
        self.n_runs_, self.n_changes_ = counts.runs, counts.n_changes

    def _score(
        self,
        newer: dict[tuple[str, tuple[str, str]], list[int]],
        parser: RowParser,
        object_types: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        """Log loss, Brier and AUC of the current model on the held-out (newest) steps: one prediction call per
        situation, not per step."""
        from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

        by_situation: dict[str, list] = {}
        for (action, (args_json, features_json)), counts in newer.items():
            by_situation.setdefault(features_json, []).append((action, args_json, counts))
        p: list[float] = []
        n: list[int] = []
        f: list[int] = []
        for features_json, items in by_situation.items():
            features = parser.row(items[0][1], features_json)[1]
            actions = [GroundAction(action, parser.row(args_json, features_json)[0]) for action, args_json, _ in items]
            p.extend(self.predict_proba(actions, features, object_types).tolist())
            n.extend(counts[0] for _, _, counts in items)
            f.extend(counts[1] for _, _, counts in items)
        p_all = np.clip(np.array(p * 2), 1e-9, 1 - 1e-9)
        y = np.array([1] * len(p) + [0] * len(p))
        w = np.array(f + [a - b for a, b in zip(n, f)], dtype=float)
        keep = w > 0
        y, p_all, w = y[keep], p_all[keep], w[keep]
        metrics: dict[str, Any] = {
            "heldout_steps": int(sum(n)), "heldout_failure_rate": float(sum(f) / max(sum(n), 1)),
            "log_loss": float(log_loss(y, p_all, sample_weight=w, labels=[0, 1])),
            "brier": float(brier_score_loss(y, p_all, sample_weight=w)), "auc": None,
        }  # fmt: skip
        if 0 < y.sum() < len(y):
            metrics["auc"] = float(roc_auc_score(y, p_all, sample_weight=w))
        return metrics

    # -- prediction ------------------------------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if not hasattr(self, "actions_"):
            raise RuntimeError("FailureModel is not fitted: call fit() or learning.retrain.load_latest() first")

    def predict_posterior(
        self,
        actions: Sequence[GroundAction],
        features: Mapping[str, Any] | None = None,
        object_types: Mapping[str, str] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean p_fail and concentration (pseudo-steps) of each grounded action (1-D arrays in the
        order given) in a situation described by `features`. Unknown action names get the optimistic prior.

        Memoised per model, situation and object set, grounding by grounding: a grounding's posterior depends on
        those, not on the other groundings asked for, so a new task over the same objects (another goal, another
        start) predicts only the groundings it has not seen (what that saves: docs/benchmarks.md)."""
        self._check_fitted()
        memo = self.__dict__.setdefault("_posterior_memo", {})
        if len(memo) > 1_000:
            memo.clear()
        context = (
            tuple(sorted((features or {}).items(), key=str)),
            tuple(sorted(object_types.items())) if object_types else None,
        )
        known: dict[str, tuple[float, float]] = memo.setdefault(context, {})
        keys = [str(action) for action in actions]
        missing = [i for i, key in enumerate(keys) if key not in known]
        if missing:
            fresh_mean, fresh_concentration = self._posterior([actions[i] for i in missing], features, object_types)
            for j, i in enumerate(missing):
                known[keys[i]] = (float(fresh_mean[j]), float(fresh_concentration[j]))
        pairs = [known[key] for key in keys]
        return (np.array([m for m, _ in pairs], dtype=float), np.array([c for _, c in pairs], dtype=float))

    def _posterior(
        self,
        actions: Sequence[GroundAction],
        features: Mapping[str, Any] | None,
        object_types: Mapping[str, str] | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        mean = np.full(len(actions), float(getattr(self, "unseen_rate_", None) or self.prior_mean))
        concentration = np.full(len(actions), float(self.prior_strength))
        groups: dict[str, list[int]] = {}
        for i, action in enumerate(actions):
            groups.setdefault(action.name, []).append(i)
        situation = situation_key(features)
        by_type = objects_by_type(object_types)
        # Priors of unseen groundings recur across tasks (same objects, other goals): memoised per model.
        memo = self.__dict__.setdefault("_prior_memo", {})
        if len(memo) > 200_000:
            memo.clear()
        context = (
            situation,
            tuple(sorted((features or {}).items(), key=str)),
            tuple(sorted(object_types.items())) if object_types else None,
        )
        for name, positions in groups.items():
            model = self.actions_.get(name)
            if model is None:
                continue
            n, f, q = np.zeros(len(positions)), np.zeros(len(positions)), np.empty(len(positions))
            r = np.full(len(positions), np.nan) if model.outlier else None
            rate = np.full(len(positions), np.nan) if model.outlier else None
            # types' offsets, per action and set of object types: computed once per model, like the priors
            pooled: dict[tuple[int, str], float] = memo.setdefault(("type-offsets", name, context[2]), {})
            for j, i in enumerate(positions):
                args = actions[i].args
                cell_key = " ".join(args) + "|" + situation
                cell = model.cells.get(cell_key)
                # a cell with no step since its kin group's last change is a situation not seen since: it
                # borrows from the grounding's record since in the others, as one never seen does
                if cell is not None and cell[0] > 1e-9:
                    n[j], f[j], q[j] = cell[0], cell[1], cell[2]
                    kin = model.outlier.get(cell_key)
                    if kin is not None and r is not None and rate is not None:
                        r[j], rate[j] = kin
                else:
                    key = (name, args, context)
                    prior = memo.get(key)
                    if prior is None:
                        prior = token_prior(
                            model, args, features, object_types, by_type, pooled, self.prior_mean, self.prior_strength
                        )
                        seen = model.groundings.get(" ".join(args))
                        if seen is not None:
                            prior = from_elsewhere(prior, seen, model.strength, model.outlier_share)
                        memo[key] = prior
                    q[j] = prior
            own_mean, own_concentration = posterior(
                n, f, q, model.strength, self.tolerance, self.trust_steps, model.outlier_share, r, rate
            )
            if model.shared:  # a sibling's change this grounding may share (`learning.siblings`)
                none = (0.0, 0.0, 0.0)
                shared = np.array([model.shared.get(kin_key(" ".join(actions[i].args)), none) for i in positions])
                own_mean, own_concentration = mixed(own_mean, own_concentration, *shared.T)
            mean[positions], concentration[positions] = own_mean, own_concentration
        return mean, concentration

    def predict_tried(self, actions: Sequence[GroundAction], features: Mapping[str, Any] | None = None) -> np.ndarray:
        """Whether each grounded action has recorded steps of its own, in the situation `features` describes or
        any other (a boolean array in the order given): what `cautious` charges for uncertainty (`learning.explore`)."""
        self._check_fitted()
        situation = situation_key(features)
        out = np.zeros(len(actions), dtype=bool)
        for i, action in enumerate(actions):
            model = self.actions_.get(action.name)
            if model is not None:
                args = " ".join(action.args)
                out[i] = args + "|" + situation in model.cells or args in model.groundings
        return out

    def predict_evidence(
        self, actions: Sequence[GroundAction], features: Mapping[str, Any] | None = None
    ) -> list[Evidence | None]:
        """What each grounded action's estimate rests on, in the situation `features` describes (its record in
        the other situations summed where it has none there); None where it has no recorded step at all."""
        self._check_fitted()
        situation = situation_key(features)
        out: list[Evidence | None] = []
        for action in actions:
            model = self.actions_.get(action.name)
            args = " ".join(action.args)
            if model is None or args not in model.groundings:
                out.append(None)
                continue
            key = args + "|" + situation
            keys = [key] if key in model.cells else [k for k in model.cells if k.partition("|")[0] == args]
            out.append(_evidence(model, keys))
        return out

    def predict_proba(
        self,
        actions: Sequence[GroundAction],
        features: Mapping[str, Any] | None = None,
        object_types: Mapping[str, str] | None = None,
    ) -> np.ndarray:
        """Posterior mean p_fail of each grounded action (a 1-D array in the order given)."""
        return self.predict_posterior(actions, features, object_types)[0]

    def action_counts(self) -> dict[str, dict[str, Any]]:
        """Per action name: steps and failures seen, which prior was fit, and its strength m."""
        return {
            name: {"steps": a.n_steps, "failures": a.n_failures, "kind": a.kind, "strength": round(a.strength, 3)}
            for name, a in sorted(getattr(self, "actions_", {}).items())
        }


@dataclass(frozen=True)
class Evidence:
    """What a grounded action's estimate rests on: `steps` and `failures` recorded (ever), `since_change` steps
    and `failures_since` of them since its last change of rate (`learning.changes`; `changes` found), `runs_ago`
    (runs recorded since it was last seen), `last_seen` (its newest step's timestamp, where steps carry one), and
    `weight`, what staleness left of its evidence (1: fresh; `learning.counts`), and `shared_change`, the
    probability that it shares a change of rate another grounding alike but for one object showed
    (`learning.siblings`; 0 where none did), which its p_fail mixes in."""

    steps: int
    failures: int
    since_change: int
    failures_since: int
    runs_ago: int | None
    last_seen: str | None
    changes: int
    weight: float
    shared_change: float = 0.0


def _evidence(model: ActionModel, keys: Sequence[str]) -> Evidence:
    steps = sum(int(model.cells[k][3]) for k in keys)
    failures = sum(int(model.cells[k][4]) for k in keys)
    recent = [model.recent[k] for k in keys if k in model.recent]
    if not recent:  # a model stored before the record was kept: every step counts
        return Evidence(steps, failures, steps, failures, None, None, 0, 1.0)
    shared = model.shared.get(kin_key(keys[0].partition("|")[0])) if model.shared and keys else None
    seen = [model.last_seen[k] for k in keys if k in model.last_seen]
    return Evidence(
        steps,
        failures,
        int(sum(r[0] for r in recent)),
        int(sum(r[1] for r in recent)),
        int(min(r[2] for r in recent)),
        max(seen) if seen else None,
        int(max(r[3] for r in recent)),
        float(max(r[4] for r in recent)),
        float(shared[0]) if shared else 0.0,
    )
