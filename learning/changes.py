"""Change points: where a grounding's failure rate broke or recovered, so that its estimate rests on the steps
since, not on an average over a world that no longer exists.

A grounding's outcomes (1 = failure) in the order they were recorded are tested for one change of rate: the
Bayes factor of "two Bernoulli segments, the change at an unknown step" (every step equally likely) against
"one segment", each rate under a Jeffreys Beta(1/2, 1/2) prior. Where the odds reach `change_odds`, the sequence
is cut at the most likely step and the part after the cut is tested again, until no change is found: what is
left is the current segment. Binary segmentation, each pass one vectorised scan of cumulative sums.

    >>> current_segment([0] * 50 + [1, 1]).start    # a break: two failures after 50 successes
    50
    >>> current_segment([1, 1, 1] + [0] * 10).start  # a recovery: ten successes after three failures
    3

What it costs a stationary grounding: at odds 20, a sequence of 20 to 300 steps at a constant rate (0.02, 0.3 or
0.5) is cut by chance in 0-0.5% of draws (400 draws each), and a cut only shortens the evidence. Two failures in
a row after 50 successes, or ten successes after three failures, are enough to cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betaln

from learning.defaults import DEFAULT_CHANGE_ODDS as DEFAULT_CHANGE_ODDS

JEFFREYS = 0.5
MIN_WINDOW = 8


@dataclass(frozen=True)
class Segment:
    """The current segment of an outcome sequence: it starts at `start` (0: no change found); `changes` are
    every cut found on the way, oldest first (the last is `start`)."""

    start: int
    changes: tuple[int, ...] = field(default=())


def current_segment(outcomes: Sequence[int] | np.ndarray | bytes, change_odds: float = DEFAULT_CHANGE_ODDS) -> Segment:
    """Where the current segment of a 0/1 outcome sequence starts: cut where a change is at least `change_odds`
    times as likely as none, and again in the part after the cut (module docstring)."""
    x = np.frombuffer(outcomes, dtype=np.uint8) if isinstance(outcomes, bytes | bytearray) else np.asarray(outcomes)
    threshold = float(np.log(change_odds))
    start, cuts = 0, list[int]()
    while True:
        at = _last_change(x[start:], threshold)
        if at is None:
            return Segment(start, tuple(cuts))
        start += at
        cuts.append(start)


def _last_change(x: np.ndarray, threshold: float) -> int | None:
    """The first step after a change in `x`, looked for in the tail windows of 8, 16, 32, ... steps and then
    in the whole: a single change of rate fits a window with one recent change, where over the whole sequence
    an old change back (an outage between good spells) hides it. Every window's splits are scored in one pass."""
    cum = np.concatenate(([0.0], np.cumsum(x, dtype=float)))
    at = int(_last_changes(cum, np.array([0]), np.array([len(x)]), threshold)[0])
    return None if at < 0 else at


def current_segments(
    outcomes: np.ndarray, bounds: np.ndarray, change_odds: float = DEFAULT_CHANGE_ODDS
) -> tuple[np.ndarray, np.ndarray]:
    """`current_segment` of many sequences at once: sequence i is `outcomes[bounds[i]:bounds[i + 1]]` (0/1).
    Each sequence's start and number of changes cut, as `current_segment` gives them (every window's odds are
    the same numbers, computed for all sequences in one pass per cut)."""
    x = np.asarray(outcomes, dtype=float)
    cum = np.concatenate(([0.0], np.cumsum(x)))  # counts of 0/1: exact, whatever the sequence
    threshold = float(np.log(change_odds))
    first, end = np.asarray(bounds[:-1], dtype=np.int64), np.asarray(bounds[1:], dtype=np.int64)
    start = np.zeros(len(first), dtype=np.int64)
    changes = np.zeros(len(first), dtype=np.int64)
    active = np.arange(len(first))
    while len(active):
        at = _last_changes(cum, first[active] + start[active], end[active], threshold)
        found = at >= 0
        active = active[found]
        start[active] += at[found]
        changes[active] += 1
    return start, changes


def _last_changes(cum: np.ndarray, begin: np.ndarray, end: np.ndarray, threshold: float) -> np.ndarray:
    """`_last_change` of each sequence [begin, end) of the outcomes whose cumulative sums are `cum` (-1: none),
    all windows of all sequences scored in one pass."""
    n = end - begin
    out = np.full(len(n), -1, dtype=np.int64)
    owner, sizes = [], []  # every window: its sequence, its size (8, 16, 32, ... below n, then n)
    for i, length in enumerate(n.tolist()):
        if length < 2:
            continue
        mine = [size for size in (MIN_WINDOW << j for j in range(64)) if size < length][: length.bit_length()]
        sizes.extend(mine)
        sizes.append(length)
        owner.extend([i] * (len(mine) + 1))
    if not sizes:
        return out
    owner_of = np.array(owner, dtype=np.int64)
    lengths = np.array(sizes, dtype=np.int64)
    starts = begin[owner_of] + n[owner_of] - lengths  # where each window starts in the outcomes
    window = np.repeat(np.arange(len(lengths)), lengths - 1)
    offsets = np.concatenate(([0], np.cumsum(lengths - 1)))
    k = np.arange(offsets[-1]) - offsets[window] + 1
    s0 = starts[window]
    total = cum[end[owner_of]] - cum[starts]
    f_left = cum[s0 + k] - cum[s0]
    f_right = total[window] - f_left
    a = JEFFREYS
    split = betaln(f_left + a, k - f_left + a) + betaln(f_right + a, (lengths[window] - k) - f_right + a)
    top = np.maximum.reduceat(split, offsets[:-1])
    summed = np.log(np.add.reduceat(np.exp(split - top[window]), offsets[:-1])) + top
    whole = betaln(total + a, lengths - total + a) - betaln(a, a)
    log_odds = summed - 2.0 * betaln(a, a) - np.log(lengths - 1) - whole
    log_odds[(total == 0) | (total == lengths)] = -np.inf  # a single outcome throughout: no change
    hits = np.flatnonzero(log_odds >= threshold)
    if len(hits) == 0:
        return out
    # each sequence's first window (the smallest) that finds a change
    sequence, first_hit = np.unique(owner_of[hits], return_index=True)
    for i, w in zip(sequence.tolist(), hits[first_hit].tolist()):
        best = int(np.argmax(split[offsets[w] : offsets[w + 1]])) + 1
        out[i] = int(starts[w] - begin[i]) + best
    return out
