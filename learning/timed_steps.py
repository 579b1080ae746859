"""The time model's evidence (`learning.durations`), streamed: per action name and raw cell (one arguments text
and one features text), recency-weighted sums of its steps' durations and failure kinds.

A step's weight doubles every `half_life` steps of its action name, relative to the action's first step, and
the newest step of each action weighs 1 once `finish`ed: the same weights as 2^-(steps after it / half_life),
without ever computing a weight below the smallest float. Where a weight would pass 2^500 the action's sums
are scaled down first and the doubling starts again from 1, so any number of steps stays finite.

Steps are kept as columns until `finish` (a cell number, a run number, the duration and four flags: 26 bytes a
step), and `finish` sums them with `np.bincount`, which adds each cell's steps in the order recorded, as a
running sum per step would, to the bit.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any

import numpy as np

from learning.counts import CellNumbers, columns, step_numbers
from learning.raw_cells import first_seen, stable_order

# The sums kept per cell: weighted successes timed, their sum and sum of squares; the same for failures;
# weighted failures (timed or not), of them transient, with side effects, and retried by the loop; retries (an
# attempt right after a retried failure of the same grounding in the same run) and of them failures; all
# attempts.
SLOTS = 13
RESCALE_AT = 500.0  # the largest exponent a weight reaches before the sums are scaled down


def is_transient(category: str | None) -> bool:
    return category is not None and category.strip().lower() == "transient"


@dataclass
class TimedCells:
    """One action name's raw cells in the order first recorded: `args` and `features` index `args_texts` and
    `features_texts`; `stats` holds each cell's `SLOTS` sums."""

    args: np.ndarray
    features: np.ndarray
    args_texts: list[str]
    features_texts: list[str]
    stats: np.ndarray


@dataclass
class TimedTotals:
    """What `TimedSteps.finish` sums besides the cells: the timed steps, their total ms (added in order) and
    each run's total ms (runs in the order of their first timed step)."""

    timed_steps: int
    total_ms: float
    run_ms: list[float]


@dataclass
class TimedSteps:
    """Steps recorded (`add`), then `finish`ed into one `TimedCells` per action name."""

    half_life: float | None
    numbers: CellNumbers = field(default_factory=CellNumbers)
    run: array = field(default_factory=lambda: array("q"))  # -1: no run
    ms: array = field(default_factory=lambda: array("d"))  # NaN: not recorded
    failed: bytearray = field(default_factory=bytearray)
    success: bytearray = field(default_factory=bytearray)
    transient: bytearray = field(default_factory=bytearray)  # of a failure: its category says transient
    side: bytearray = field(default_factory=bytearray)  # of a failure: it left side effects
    runs: dict[Any, int] = field(default_factory=lambda: {None: -1})

    def add(self, chunk: Sequence[Sequence[Any]]) -> None:
        """Record rows (action, args JSON, features JSON, outcome, failure_category, duration_ms,
        side_effects[, run_id], anything after ignored), oldest first."""
        if not chunk:
            return
        actions, args, features, outcomes, categories, durations, sides, runs = columns(chunk, 8)
        if None in features or "" in features:
            features = [text or "{}" for text in features]
        self.numbers.add(actions, args, features)
        known = self.runs
        for run in dict.fromkeys(runs):  # new runs numbered 0, 1, ... in the order first met
            if run not in known:
                known[run] = len(known) - 1  # `runs` holds None -> -1 (no run) from the start
        self.run.extend(map(known.__getitem__, runs))
        self.ms.extend([math.nan if ms is None else ms for ms in durations])
        failed = bytes([outcome == "failure" for outcome in outcomes])
        self.failed.extend(failed)
        self.success.extend(bytes([outcome == "success" for outcome in outcomes]))
        # a category is read only where a step failed: what it says of a success is never asked
        kinds = {
            category: category == "transient" or is_transient(category)
            for category in set(compress(categories, failed))
        }
        self.transient.extend(bytes(map(kinds.get, categories, repeat(False))))
        self.side.extend(bytes(map(bool, sides)))

    def finish(self) -> tuple[dict[str, TimedCells], TimedTotals]:
        """Each action name's cells and the totals (call once, after the last `add`)."""
        cell, cell_action, cell_args, cell_features = self.numbers.cells()
        step_action, step_args, _ = self.numbers.steps()
        names = list(self.numbers.actions)
        action = cell_action[cell]
        per_action = np.bincount(action, minlength=len(names))
        step = step_numbers(action, per_action)
        ms = np.frombuffer(self.ms, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            timed = (ms >= 0.0) & (ms < math.inf)
        flags = [np.frombuffer(bytes(b), dtype=np.uint8).astype(bool) for b in (self.failed, self.success)]
        failed, success = flags
        transient = failed & np.frombuffer(bytes(self.transient), dtype=np.uint8).astype(bool)
        side = failed & np.frombuffer(bytes(self.side), dtype=np.uint8).astype(bool)
        retryable = transient & ~side
        run = np.frombuffer(self.run, dtype=np.int64)
        retry = _retries(run, retryable, step_action, step_args)
        weight, period = self._weights(step)
        timed_success, timed_failure = timed & success, timed & failed
        with np.errstate(invalid="ignore"):  # an untimed step's NaN or infinity is never a term
            w_ms = np.where(timed, weight * ms, 0.0)
            w_ms2 = np.where(timed, w_ms * ms, 0.0)  # (weight * ms) * ms, as a running sum multiplied
        # each slot's terms (`SLOTS`) as (steps in it, their terms), made into one array a slot at a time in
        # `_sums`: a step outside a slot adds 0.0, which changes no sum
        terms = [
            (timed_success, weight), (timed_success, w_ms), (timed_success, w_ms2), (timed_failure, weight),
            (timed_failure, w_ms), (timed_failure, w_ms2), (failed, weight), (transient, weight), (side, weight),
            (retryable, weight), (retry, weight), (retry & failed, weight), (None, weight),
        ]  # fmt: skip
        stats = self._sums(cell, cell_action, step, per_action, terms, period)
        run_timed = timed & (run >= 0)
        by_first = first_seen(run[run_timed])[1]  # the runs in the order of their first timed step
        totals = np.bincount(run[run_timed], weights=ms[run_timed], minlength=len(self.runs) - 1)
        total_ms = float(np.bincount(np.zeros(int(timed.sum()), dtype=np.int64), weights=ms[timed], minlength=1)[0])
        out = TimedTotals(int(timed.sum()), total_ms, totals[by_first].tolist())
        args_texts, features_texts = list(self.numbers.args), list(self.numbers.features)
        by_action = stable_order(cell_action)
        stats = stats[by_action]  # each action's cells together, in the order first met: views of it below
        bounds = np.concatenate(([0], np.cumsum(np.bincount(cell_action, minlength=len(names)))))
        tables = {}
        for a, name in enumerate(names):
            mine = slice(bounds[a], bounds[a + 1])
            tables[name] = TimedCells(
                cell_args[by_action[mine]], cell_features[by_action[mine]], args_texts, features_texts, stats[mine]
            )
        return tables, out

    def _weights(self, step: np.ndarray) -> tuple[np.ndarray, int | None]:
        """Each step's weight, 2^(its step number since its action's last rescale / half_life), and the steps
        between rescales (None: never)."""
        if self.half_life is None:
            return np.ones(len(step)), None
        period = _rescale_period(self.half_life)
        since = step if period is None else step % period
        size = int(since.max()) + 1 if len(since) else 0
        powers = np.array([2.0 ** (k / self.half_life) for k in range(size)])  # Python's pow, as a loop's
        return powers[since], period

    def _sums(
        self,
        cell: np.ndarray,
        cell_action: np.ndarray,
        step: np.ndarray,
        per_action: np.ndarray,
        terms: Sequence[tuple[np.ndarray | None, np.ndarray]],
        period: int | None,
    ) -> np.ndarray:
        """Each cell's sum of each slot's terms (`terms`: the steps in the slot, None for all, and their terms),
        added in the order recorded, scaled down at each rescale and so that each action's newest step weighs 1:
        between rescales a running sum continues from the scaled one (the first term of the next segment's)."""
        n_cells = len(cell_action)
        stats = np.zeros((n_cells, SLOTS))
        segment = np.zeros(len(cell), dtype=np.int64) if period is None else step // period
        segments = int(segment.max()) + 1 if len(segment) else 0
        everyone = np.arange(n_cells, dtype=np.int64)
        scaled = [per_action[cell_action] > s * (period or 0) for s in range(segments)]
        for j, (chosen, terms_j) in enumerate(terms):
            values = terms_j if chosen is None else np.where(chosen, terms_j, 0.0)
            for s in range(segments):
                if segments == 1:
                    stats[:, j] = np.bincount(cell, weights=values, minlength=n_cells)
                    continue
                mine = segment == s
                if s > 0:  # every cell of an action that reached this segment is scaled, as a loop's table was
                    assert self.half_life is not None and period is not None
                    stats[scaled[s], j] *= 2.0 ** -(period / self.half_life)
                numbers = np.concatenate((everyone, cell[mine])) if s > 0 else cell[mine]
                weights = np.concatenate((stats[:, j], values[mine])) if s > 0 else values[mine]
                stats[:, j] = np.bincount(numbers, weights=weights, minlength=n_cells)
        if self.half_life is not None:
            offset = (per_action - 1) // period * period if period is not None else np.zeros_like(per_action)
            factors = [2.0 ** -((int(k) - 1 - int(o)) / self.half_life) for k, o in zip(per_action, offset)]
            stats *= np.array(factors)[cell_action][:, None]
        return stats


def _rescale_period(half_life: float) -> int | None:
    """The steps after which a weight's exponent (steps / half_life) first passes `RESCALE_AT`; None when no
    stream reaches it."""
    if not 0 < RESCALE_AT * half_life < 1e15:
        return None
    k = max(1, int(RESCALE_AT * half_life) - 2)
    while k > 1 and (k - 1) / half_life > RESCALE_AT:
        k -= 1
    while not k / half_life > RESCALE_AT:
        k += 1
    return k


def _retries(run: np.ndarray, retryable: np.ndarray, action: np.ndarray, args: np.ndarray) -> np.ndarray:
    """Whether each step is a retry: the step before it in its run (any action) was a failure the loop
    retries, of the same action name and arguments text."""
    out = np.zeros(len(run), dtype=bool)
    with_run = np.flatnonzero(run >= 0)
    order = with_run[stable_order(run[with_run])]  # each run's steps in the order recorded
    if len(order) < 2:
        return out
    before, after = order[:-1], order[1:]
    same = (run[before] == run[after]) & retryable[before] & (action[before] == action[after])
    out[after[same & (args[before] == args[after])]] = True
    return out
