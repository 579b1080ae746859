"""`TimeModel`: what a grounded action costs in the units a runtime pays, learned from executed steps.

Per grounding (in one situation, the cells of `learning.model`), from the same recency-weighted steps:
- the expected duration of a success and of a failure (`duration_ms`), each the grounding's own weighted mean
  shrunk towards a prior, with the same form as p_fail's (`learning.shrinkage`):

      d_g = (n_g * mean_g + m * prior_g) / (n_g + m)

  prior_g is a ridge regression of log duration over the failure model's tokens (`learning.features`: the
  same tool elsewhere, the same road the other way, an object in a situation), out of fold for a grounding
  with steps so its own evidence is not counted twice, the action name's mean without enough rows; m is fit
  per action name by the normal-normal empirical Bayes estimate (within-cell variance over the spread of the
  cells' means around their priors, both relative), bounded to the same [`MIN_STRENGTH`, `MAX_STRENGTH`];
  and from `trust_steps` weighted steps on the estimate stays within `tolerance * (trust / n_g)^2` of the
  grounding's own mean (relative), so it is consistent: 30 steps leave it within 3.5% of what it measured;
- the share of its failures that were transient (`failure_category`), that left side effects
  (`side_effects`) and that the agent loop retries (transient without side effects,
  `portfolio.agent.failures.decide`), each a beta-binomial posterior over its failures shrunk towards the
  action name's share by `learning.shrinkage.posterior`, the action name's share itself shrunk towards 0
  (plan-ending) by `prior_strength` pseudo-failures. A failure without a category counts as plan-ending: what
  the `risk` objective already assumes of every failure.
- how often a retry fails: an attempt right after a retried failure of the same grounding in the same run is
  a retry. Failures are not always independent (a service that is down stays down: every retry fails), so
  `learning.costs` prices retries by their own record, shrunk towards the grounding's p_fail
  (`retry_p_fail`).

`TimeModel(...).fit_rows(chunks)` fits on timed steps (usually through `FailureModel.fit`, as its
`durations_`); `predict(actions, features)` returns a `TimeEstimate`, arrays in the order asked, an action name
never seen taking the mean timed step. `learning.costs.time_priced` turns these and p_fail into the expected
time to success. Nothing here touches the database; the model is plain data stored with the failure model
(`learning.storage`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from domains.model import GroundAction
from learning.features import RowParser, situation_key, step_tokens
from learning.prior import CAP_STEPS, design_parts, fold_of
from learning.raw_cells import ParsedCells, first_seen, parse_cells
from learning.shrinkage import MAX_STRENGTH, MIN_STRENGTH, fit_strength, posterior
from learning.timed_steps import TimedCells, TimedSteps

# (action, args JSON, features JSON, outcome, failure_category, duration_ms, side_effects[, run_id]): the steps
# columns read
TimeRow = tuple[Any, ...]
TIME_COLUMNS = ("action", "args", "features", "outcome", "failure_category", "duration_ms", "side_effects", "run_id")

# With no step of any action timed: what an action is assumed to take, so that the `time` objective plans on
# the plan's length (and its failures) rather than on nothing.
DEFAULT_MS = 1000.0
_RIDGE_ALPHA = 1.0  # per capped step: a token needs a few groundings' worth of steps to move the prior far
_MIN_ROWS = 3  # below this many timed rows an action name's prior is its mean: a regression would fit noise


@dataclass
class DurationFit:
    """One outcome's durations for one action name: the prior and each cell's [n_w, weighted mean, prior]."""

    strength: float
    base_ms: float
    intercept: float = 0.0
    weights: dict[str, float] = field(default_factory=dict)
    cells: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class TimeAction:
    """What prediction needs of one action name (plain data, stored as JSON)."""

    success: DurationFit | None
    failure: DurationFit | None
    shares: list[float]  # the action name's transient, side-effect and retried shares of its failures
    share_strengths: list[float]
    # cell -> weighted [failures, transient, side, retried, retries, failed retries, attempts]
    cells: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class TimeEstimate:
    """Per grounded action (in the order asked): expected ms of a success and of a failure, and the shares of
    its failures that are transient, left side effects, and are retried by the loop; and the (weighted)
    retries seen and how many of them failed, and all its attempts (retries included), from which
    `learning.costs` tells a first attempt's p_fail from a retry's (`learning.objective.split_retries`)."""

    success_ms: np.ndarray
    failure_ms: np.ndarray
    transient: np.ndarray
    side_effects: np.ndarray
    retried: np.ndarray
    retries: np.ndarray
    failed_retries: np.ndarray
    attempts: np.ndarray


class TimeModel:
    """Expected durations and failure kinds per grounding (see the module docstring). `half_life_steps`,
    `prior_strength`, `tolerance` and `trust_steps` mean what they mean in `learning.model.FailureModel`,
    which passes its own."""

    def __init__(
        self,
        half_life_steps: float | None = 5000.0,
        prior_strength: float = 10.0,
        tolerance: float = 0.05,
        trust_steps: float = 25.0,
    ) -> None:
        self.half_life_steps = half_life_steps
        self.prior_strength = prior_strength
        self.tolerance = tolerance
        self.trust_steps = trust_steps
        self.actions: dict[str, TimeAction] = {}
        self.default_ms = DEFAULT_MS
        self.replan_ms = DEFAULT_MS
        self.timed_steps = 0

    # -- fitting -----------------------------------------------------------------------------------------------
    def fit_rows(self, chunks: Iterable[Sequence[TimeRow]]) -> TimeModel:
        """Fit on raw steps rows (`TIME_COLUMNS`), oldest first: `add` each chunk, then `finish`."""
        for chunk in chunks:
            self.add(chunk)
        return self.finish()

    def add(self, chunk: Sequence[TimeRow]) -> None:
        """Accumulate one chunk of rows (streamed: `learning.retrain` feeds the chunks it reads for the
        failure model; columns after `TIME_COLUMNS` are ignored). A row's run id, when given, sums into its
        run's time: the learned replan penalty is the mean time of a run's steps, what a plan-ending failure
        can lose."""
        self.__dict__.setdefault("_acc", TimedSteps(self.half_life_steps)).add(chunk)

    def finish(self) -> TimeModel:
        """Fit every action name on what `add` accumulated (call once, after the last chunk)."""
        steps = self.__dict__.pop("_acc", None) or TimedSteps(self.half_life_steps)
        self.__dict__.pop("_memo", None)
        tables, totals = steps.finish()
        del steps
        self.timed_steps += totals.timed_steps
        self.default_ms = totals.total_ms / self.timed_steps if self.timed_steps else DEFAULT_MS
        runs = [t for t in totals.run_ms if t > 0]
        self.replan_ms = float(np.mean(runs)) if runs else self.default_ms
        parser = RowParser()
        self.actions = {name: self._fit_action(table, parser) for name, table in tables.items()}
        return self

    def _fit_action(self, table: TimedCells, parser: RowParser) -> TimeAction:
        rows = parse_cells(table.args, table.features, table.args_texts, table.features_texts, parser)
        stats = table.stats
        success = self._fit_durations(rows, stats[:, 0], stats[:, 1], stats[:, 2])
        failure = self._fit_durations(rows, stats[:, 3], stats[:, 4], stats[:, 5])
        size = len(rows.cell_keys)
        counts = np.column_stack([np.bincount(rows.cell, weights=stats[:, 6 + i], minlength=size) for i in range(7)])
        cells = dict(zip(rows.cell_keys, counts.tolist()))
        n = counts[:, 0]
        shares, strengths = [], []
        for i in (1, 2, 3):
            share = float((counts[:, i].sum()) / (n.sum() + self.prior_strength))  # towards 0: plan-ending
            shares.append(share)
            strengths.append(fit_strength(n, counts[:, i], np.full(len(n), share), default=self.prior_strength))
        return TimeAction(success, failure, shares, strengths, cells)

    def _fit_durations(
        self, rows: ParsedCells, n: np.ndarray, total: np.ndarray, squares: np.ndarray
    ) -> DurationFit | None:
        """Shrinkage of each cell's mean duration towards the prior (module docstring); None: nothing timed."""
        seen = n > 1e-12
        if not seen.any():
            return None
        mean = np.divide(total, n, out=np.zeros_like(n), where=seen)
        base = float(total[seen].sum() / n[seen].sum())
        fit = DurationFit(strength=self.prior_strength, base_ms=base)
        timed = np.flatnonzero(seen)
        n_s, mean_s = n[seen], mean[seen]
        prior = np.full(len(timed), base)
        if len(timed) >= _MIN_ROWS and np.ptp(np.log(np.maximum(mean_s, 1e-3))) > 1e-9:
            X, vocab = design_parts([(numbers[timed], parts) for numbers, parts in rows.parts], len(timed))
            y = np.log(np.maximum(mean_s, 1e-3))
            w = np.minimum(n_s, CAP_STEPS)
            folds = np.array([fold_of(g) for g in rows.groundings], dtype=np.int64)[rows.grounding[timed]]
            for k in set(folds.tolist()):
                train = folds != k
                if train.sum() >= 2:
                    prior[~train] = np.exp(_ridge(X[train], y[train], w[train]).predict(X[~train]))
            full = _ridge(X, y, w)
            fit.intercept = float(full.intercept_)
            fit.weights = {t: float(full.coef_[c]) for t, c in vocab.items() if full.coef_[c] != 0.0}
        else:
            fit.intercept = math.log(max(base, 1e-3))
        cell, order = first_seen(rows.cell[timed])  # the timed raw cells' cells, in the order first met
        sums = [np.bincount(cell, weights=x, minlength=len(order)) for x in (n_s, n_s * mean_s, n_s * prior)]
        sums.append(np.bincount(cell, weights=squares[seen], minlength=len(order)))
        keys = rows.cell_keys
        for key, (steps, weighted_ms, weighted_prior, sq) in zip(
            [keys[c] for c in order.tolist()], np.column_stack(sums).tolist()
        ):
            mean_ms = weighted_ms / steps
            fit.cells[key] = [steps, mean_ms, weighted_prior / steps, max(sq / steps - mean_ms**2, 0.0)]  # var
        fit.strength = self._strength(np.array(list(fit.cells.values()), dtype=float).reshape(-1, 4))
        return fit

    def _strength(self, cells: np.ndarray) -> float:
        """m = within variance / between variance, both relative to the prior (normal-normal empirical Bayes)."""
        if len(cells) < 3:
            return float(self.prior_strength)
        n, mean, prior, var = cells[:, 0], cells[:, 1], np.maximum(cells[:, 2], 1e-9), cells[:, 3]
        within = float(np.sum(n * var / prior**2) / max(np.sum(n), 1e-12))
        between = float(np.mean(np.maximum(((mean - prior) / prior) ** 2 - within / np.maximum(n, 1e-12), 0.0)))
        if between <= 1e-12:
            return MAX_STRENGTH
        return float(np.clip(within / between, MIN_STRENGTH, MAX_STRENGTH))

    # -- prediction --------------------------------------------------------------------------------------------
    def predict(
        self,
        actions: Sequence[GroundAction],
        features: Mapping[str, Any] | None = None,
        object_types: Mapping[str, str] | None = None,
    ) -> TimeEstimate:
        """Expected durations and failure-kind shares of each grounded action in the situation `features`
        describes. An action name never seen takes the mean timed step and a failure that ends the plan.

        Memoised per situation and object set, grounding by grounding, as `FailureModel.predict_posterior`: a
        new task over the same objects predicts only the groundings it has not seen (the `time` objective's
        warm plan latency is then the `risk` one's)."""
        memo = self.__dict__.setdefault("_memo", {})
        if len(memo) > 1_000:
            memo.clear()
        context = (
            tuple(sorted((features or {}).items(), key=str)),
            tuple(sorted(object_types.items())) if object_types else None,
        )
        known: dict[str, tuple[float, ...]] = memo.setdefault(context, {})
        keys = [str(action) for action in actions]
        missing = [i for i, key in enumerate(keys) if key not in known]
        if missing:
            fresh = self._predict([actions[i] for i in missing], features, object_types)
            for j, i in enumerate(missing):
                known[keys[i]] = tuple(float(column[j]) for column in vars(fresh).values())
        rows = np.array([known[key] for key in keys], dtype=float).reshape(len(keys), 8)
        return TimeEstimate(*(rows[:, k].copy() for k in range(8)))

    def _predict(
        self,
        actions: Sequence[GroundAction],
        features: Mapping[str, Any] | None,
        object_types: Mapping[str, str] | None,
    ) -> TimeEstimate:
        size = len(actions)
        out = TimeEstimate(*(np.zeros(size) for _ in range(8)))
        out.success_ms[:], out.failure_ms[:] = self.default_ms, self.default_ms
        situation = situation_key(features)
        groups: dict[str, list[int]] = {}
        for i, action in enumerate(actions):
            groups.setdefault(action.name, []).append(i)
        for name, positions in groups.items():
            model = self.actions.get(name)
            if model is None:
                continue
            keys = [" ".join(actions[i].args) + "|" + situation for i in positions]
            for fit, target in ((model.success, out.success_ms), (model.failure, out.failure_ms)):
                if fit is None:
                    continue
                for i, key in zip(positions, keys):
                    cell = fit.cells.get(key)
                    if cell is not None:
                        target[i] = self._posterior_ms(cell, fit.strength)
                    else:
                        tokens = step_tokens(actions[i].args, features, object_types)
                        score = fit.intercept + sum(fit.weights.get(t, 0.0) * v for t, v in tokens)
                        target[i] = math.exp(min(score, 50.0))
            if model.failure is None:
                out.failure_ms[positions] = out.success_ms[positions]  # no failure timed: as long as a success
            counts = np.array([model.cells.get(key, (0.0,) * 7) for key in keys], dtype=float).reshape(-1, 7)
            out.retries[positions], out.failed_retries[positions] = counts[:, 4], counts[:, 5]
            out.attempts[positions] = counts[:, 6]
            for j, target in enumerate((out.transient, out.side_effects, out.retried)):
                target[positions] = posterior(
                    counts[:, 0], counts[:, j + 1], np.full(len(keys), model.shares[j]),
                    model.share_strengths[j], self.tolerance, self.trust_steps,
                )[0]  # fmt: skip
        return out

    def _posterior_ms(self, cell: Sequence[float], strength: float) -> float:
        n, mean, prior = cell[0], cell[1], cell[2]
        shrunk = (n * mean + strength * prior) / (n + strength)
        band = self.tolerance * (self.trust_steps / max(n, 1e-12)) ** 2 * mean
        return float(min(max(shrunk, mean - band), mean + band))


def _ridge(X: Any, y: np.ndarray, w: np.ndarray) -> Any:
    from sklearn.linear_model import Ridge  # fitting only: see `learning.prior.fit_logistic`

    return Ridge(alpha=_RIDGE_ALPHA, solver="sparse_cg").fit(X, y, sample_weight=w)
