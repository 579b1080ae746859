"""The poisoning guard: steps that one principal alone reports, whose failure rate departs sharply from what the
last model learned of the same grounded action, are held back from the fit.

    review = review_steps(store, "acme", through=store.last_step_id())   # before `learning.retrain` fits
    review.held          # [HeldBatch(principal, action, steps, failures, expected_p_fail, log10_p, ...)]
    review.held_ids      # the step ids the fit leaves out

`review_steps` reviews a tenant's steps recorded since its last model (its metadata's `through`), with those
that model held back, and returns a `Review`; it never raises on a store without a model or provenance (an empty
review). Per *source* (the principal, the API key's name, that posted a step: `traces.provenance`; a step without
provenance, recorded by the CLI, a JSONL import or the Python API, is a trusted local step, never held) and
grounded action, a batch of at least `min_steps` steps is tested against the last model's posterior for that
grounding, Beta(p c, (1 - p) c) with p its p_fail and c its pseudo-steps (averaged over the batch's
situations): the beta-binomial probability of as many failures or more (or, for fabricated successes, as few or
fewer), `log10_tails`. Below `alpha` the batch
*departs*. It is kept all the same when another source's last `recent_steps` on the grounding depart the same
way at the looser `agree_alpha`: an outage is seen by the agents that use the action. Otherwise it is held back:
left out of the fit, kept in the store, listed with the model (`ModelInfo.held`, the retrain's job result, a
warning in the log), and reviewed again at every retrain until one with `include_held` (`portfolio retrain
--include-held`) fits it, or one without the guard (`--no-poison-guard`) fits everything.

It stops sharp departures, not every bias. It does not catch a grounding no model has a record of (so a
tenant's first model, or the first after a model stored without `through`), a principal holding a second key
that agrees with the first, or failures fed fewer than `min_steps` at a time between retrains. An outage seen by
one agent alone is held until another source sees it or an operator releases it. Why this test and its
thresholds, and what was measured: docs/decisions/tenant-learning.md.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from traces.tenants import step_filter

if TYPE_CHECKING:
    from learning.model import FailureModel
    from traces.store import TraceStore

log = logging.getLogger(__name__)

ALPHA = 1e-6
AGREE_ALPHA = 0.01
MIN_STEPS = 10
RECENT_STEPS = 20
_RECENT_SCAN = 20_000  # the newest steps of a grounding looked through for other sources' recent ones
_PROVENANCE = "step_provenance"  # traces.provenance.TABLE


class HeldBatch(BaseModel):
    """One principal's steps of one grounded action, held back from the fit (module docstring)."""

    principal: str
    tenant: str = Field(description="the principal's tenant")
    action: str = Field(description="the grounded action, as `(pick-up b)`")
    steps: int
    failures: int
    expected_p_fail: float = Field(description="the last model's p_fail of the action")
    log10_p: float = Field(description="log10 of the probability of the batch under the last model (one tail)")
    direction: Literal["failures", "successes"] = Field(description="what the batch has too many of")


@dataclass
class Review:
    """What `review_steps` found: the batches held back, their step ids (all, and each batch's as ranges of
    consecutive ids), and how many steps it reviewed."""

    held: list[HeldBatch] = field(default_factory=list)
    held_ids: set[int] = field(default_factory=set)
    held_ranges: list[list[list[int]]] = field(default_factory=list)
    reviewed: int = 0

    def metadata(self) -> list[dict[str, Any]]:
        """The held batches as the model's metadata keeps them, each with its step ids, for the next review."""
        return [batch.model_dump() | {"ids": ranges} for batch, ranges in zip(self.held, self.held_ranges)]


@dataclass
class _Batch:
    action: str
    args: tuple[str, ...]
    source: tuple[str, str] | None  # (tenant, principal); None: trusted local steps
    steps: int = 0
    failures: int = 0
    situations: dict[str, int] = field(default_factory=dict)
    ids: list[int] = field(default_factory=list)


def review_steps(
    store: TraceStore,
    tenant: str,
    through: int,
    *,
    include_held: bool = False,
    alpha: float = ALPHA,
    agree_alpha: float = AGREE_ALPHA,
    min_steps: int = MIN_STEPS,
    recent_steps: int = RECENT_STEPS,
) -> Review:
    """Review `tenant`'s steps recorded since its last model, up to step id `through`, and the steps that model
    held back (fitted regardless with `include_held`); see the module docstring. An empty review where there is
    nothing to compare with: no model of the tenant, a model stored without `through`, one that cannot be read,
    or no step posted through the service."""
    from learning.storage import ModelFormatError, model_from_bytes

    if not _has_provenance(store):
        return Review()
    stored = store.latest_model(tenant)
    if stored is None or "through" not in stored.metadata:
        return Review()
    try:
        model = model_from_bytes(bytes(stored.blob), f"{store.path}: model version {stored.version}")
    except ModelFormatError as error:
        log.warning("poison guard: no model to compare with (%s); nothing held back", error)
        return Review()
    held_before = [range_ for entry in stored.metadata.get("held", []) for range_ in entry.get("ids", [])]
    if include_held and held_before:
        log.info("releasing %d batch(es) held back from tenant %r's model", len(stored.metadata["held"]), tenant)
    since = int(stored.metadata["through"])
    batches = _read_batches(store, tenant, since, through, [] if include_held else held_before)
    review = Review(reviewed=sum(b.steps for b in batches.values()))
    for batch in batches.values():
        if batch.source is None or batch.steps < min_steps:
            continue
        found = _departure(model, batch, alpha)
        if found is None:
            continue
        p, concentration, direction, log10_p = found
        if _agreed(store, tenant, through, batch, p, concentration, direction, agree_alpha, recent_steps):
            log.info(
                "poison guard: %s's %d steps of %s depart from p_fail %.3f (p = 10^%.0f), and others agree: kept",
                batch.source[1], batch.steps, _text(batch), p, log10_p,
            )  # fmt: skip
            continue
        held = HeldBatch(
            principal=batch.source[1], tenant=batch.source[0], action=_text(batch), steps=batch.steps,
            failures=batch.failures, expected_p_fail=round(p, 6), log10_p=round(log10_p, 1), direction=direction,
        )  # fmt: skip
        log.warning(
            "poison guard: held back %d steps of %s from principal %r (tenant %r): %d failures where the model "
            "expects p_fail %.3f (p = 10^%.0f) and no other source agrees; `portfolio retrain --include-held` "
            "fits them", held.steps, held.action, held.principal, held.tenant, held.failures, p, log10_p,
        )  # fmt: skip
        review.held.append(held)
        review.held_ranges.append(_ranges(batch.ids))
        review.held_ids.update(batch.ids)
    return review


def _has_provenance(store: TraceStore) -> bool:
    return store._retry(lambda: store.backend.table_exists(store.db, _PROVENANCE))


def _read_batches(
    store: TraceStore, tenant: str, since: int, through: int, held_before: Sequence[Sequence[int]]
) -> dict[tuple[Any, ...], _Batch]:
    """The steps after `since` up to `through`, and those in the `held_before` id ranges, grouped by source and
    grounded action."""
    where, params = step_filter(tenant, "s.run_id")
    select = (
        "SELECT s.id, s.action, s.args, s.features, s.outcome, p.tenant, p.principal FROM steps s "
        f"LEFT JOIN {_PROVENANCE} p ON p.run_id = s.run_id AND p.step = s.step WHERE {where} AND "
    )
    queries = [(select + "s.id > ? AND s.id <= ?", [*params, since, through])]
    held = select + "s.id >= ? AND s.id <= ? AND s.id <= ?"
    queries += [(held, [*params, low, high, since]) for low, high in held_before]
    batches: dict[tuple[Any, ...], _Batch] = {}
    for sql, values in queries:

        def read(sql: str = sql, values: list[Any] = values) -> list[Any]:
            return store.db.execute(sql, values).fetchall()

        rows = store._retry(read)
        for step_id, action, args, features, outcome, owner, principal in rows:
            source = None if principal is None else (owner, principal)
            key = (source, action, args)
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = _Batch(action, tuple(json.loads(args)), source)
            batch.steps += 1
            batch.failures += outcome == "failure"
            situation = features or "{}"
            batch.situations[situation] = batch.situations.get(situation, 0) + 1
            batch.ids.append(step_id)
    return batches


def _departure(
    model: FailureModel, batch: _Batch, alpha: float
) -> tuple[float, float, Literal["failures", "successes"], float] | None:
    """(p_fail, pseudo-steps, direction, log10 p) of a batch that departs from the model's posterior of its
    grounding, or None (it does not, or the model has no record of the grounding)."""
    from domains.model import GroundAction

    action = GroundAction(batch.action, batch.args)
    if not model.predict_tried([action])[0]:
        return None
    means, weights = [], []
    for situation, count in batch.situations.items():
        mean, concentration = model.predict_posterior([action], json.loads(situation))
        means.append((float(mean[0]), float(concentration[0])))
        weights.append(count)
    total = sum(weights)
    p = sum(m * w for (m, _), w in zip(means, weights)) / total
    c = sum(c * w for (_, c), w in zip(means, weights)) / total
    upper, lower = log10_tails(batch.failures, batch.steps, p, c)
    if upper < math.log10(alpha):
        return p, c, "failures", upper
    if lower < math.log10(alpha):
        return p, c, "successes", lower
    return None


def _agreed(
    store: TraceStore,
    tenant: str,
    through: int,
    batch: _Batch,
    p: float,
    concentration: float,
    direction: str,
    agree_alpha: float,
    recent_steps: int,
) -> bool:
    """Whether another source's last `recent_steps` steps on the batch's grounding depart the same way."""
    where, params = step_filter(tenant, "s.run_id")
    sql = (
        f"SELECT s.outcome, p.tenant, p.principal FROM steps s LEFT JOIN {_PROVENANCE} p ON p.run_id = s.run_id "
        f"AND p.step = s.step WHERE s.action = ? AND s.id <= ? AND {where} AND s.args = ? ORDER BY s.id DESC LIMIT ?"
    )
    args = json.dumps(list(batch.args), separators=(",", ":"))
    values = [batch.action, through, *params, args, _RECENT_SCAN]
    rows = store._retry(lambda: store.db.execute(sql, values).fetchall())
    recent: dict[tuple[str, str] | None, list[bool]] = {}
    for outcome, owner, principal in rows:
        source = None if principal is None else (owner, principal)
        if source != batch.source and len(recent.setdefault(source, [])) < recent_steps:
            recent[source].append(outcome == "failure")
    for outcomes in recent.values():
        upper, lower = log10_tails(sum(outcomes), len(outcomes), p, concentration)
        if (upper if direction == "failures" else lower) < math.log10(agree_alpha):
            return True
    return False


def log10_tails(failures: int, steps: int, p: float, concentration: float) -> tuple[float, float]:
    """log10 of P(K >= failures) and of P(K <= failures) for K ~ BetaBinomial(steps, p c, (1 - p) c): the
    probability of as many failures or more, and of as few or fewer, when the failure rate is what a posterior
    Beta(p c, (1 - p) c) says. In logs, so that 300 failures where 0.02 was expected is 10^-255, not 0."""
    import numpy as np
    from scipy.special import betaln, gammaln, logsumexp

    p = min(max(p, 1e-9), 1 - 1e-9)
    c = max(concentration, 1e-6)
    a, b = p * c, (1 - p) * c
    j = np.arange(steps + 1, dtype=float)
    log_pmf = gammaln(steps + 1) - gammaln(j + 1) - gammaln(steps - j + 1) + betaln(j + a, steps - j + b) - betaln(a, b)
    upper = float(logsumexp(log_pmf[failures:])) / math.log(10)
    lower = float(logsumexp(log_pmf[: failures + 1])) / math.log(10)
    return min(upper, 0.0), min(lower, 0.0)


def _text(batch: _Batch) -> str:
    return "(" + " ".join((batch.action, *batch.args)) + ")"


def _ranges(ids: Iterable[int]) -> list[list[int]]:
    """Sorted ids as [first, last] ranges of consecutive ids: a batch posted at once is one range."""
    out: list[list[int]] = []
    for step_id in sorted(ids):
        if out and step_id == out[-1][1] + 1:
            out[-1][1] = step_id
        else:
            out.append([step_id, step_id])
    return out
