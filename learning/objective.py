"""What a learned cost prices: the objective the user picks.

- `risk` (the default): `base + lam * -log(1 - p_fail)`, every failure taken to end the plan; summed
  over a plan, -log of the chance that every step succeeds (`learning.costs`).
- `time`: the expected milliseconds a step costs the runtime until it succeeds, as the agent loop runs it
  (`portfolio.agent.loop_run`): a failure that is transient and left no side effects is retried, up to
  `max_retries` times; any other failure (or the last retry's) ends the plan, and costs `replan_ms`, the time
  a replan loses; a failure that left side effects costs `side_effect_weight` replans more. Per attempt a step
  succeeds with 1 - p, is retried with p * r (r: the retried share of its failures), and

      attempts   A = sum_{k=0..R} (p r)^k
      time       A * ((1 - p) * d_success + p * d_failure)
      ends plan  P_end = 1 - (1 - p) * A
      expected_ms = time + replan_ms * (P_end + side_effect_weight * p * s * A)       (s: side-effect share)

  with independent attempts; a retry's own failure rate, learned from the retries in the traces
  (`retry_p_fail`), replaces p after the first attempt, so a service that stays down is not retried for free.

  A tool answering in 100 ms that fails 40% transiently costs 156 ms of attempts with two retries (167 ms,
  1 / (1 - p), with unbounded ones) plus a 6.4% chance of ending the plan; one taking 2 s that never fails
  costs 2 s: under `time` the planner takes the quick one, where `risk` takes the slow one. The planner's cost is
  expected_ms / 1000 (seconds: Fast Downward's integer costs keep three decimals, so milliseconds stay exact
  without overflowing a long plan's sum). The durations and shares come from `learning.durations.TimeModel`.

`check_objective(name)` returns the objective or raises `ObjectiveError` (a `ValueError`) naming the choices;
`TimeParams` (retries, replan and side-effect costs) raises it on a value out of range; `expected_ms` prices
steps. Kept apart from `learning.costs` so the planner and the CLI check an objective without importing numpy or
scikit-learn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

Objective = Literal["risk", "time"]
OBJECTIVES: tuple[str, ...] = ("risk", "time")
DEFAULT_OBJECTIVE: Objective = "risk"
# The agent loop's default retries of a transient failure (`portfolio.agent.loop_types.LoopConfig.max_retries`).
DEFAULT_RETRIES = 2
# A side-effect failure costs one replan more than a clean one (the clean-up: the e-mail to take back): the
# default; `--side-effect-weight` sets how much dearer it is for a runtime.
DEFAULT_SIDE_EFFECT_WEIGHT = 1.0
# How many retries' worth of belief a grounding's p_fail carries about its retries: a few retries that all
# failed make the next one look doomed, a handful that succeeded leave it at p_fail.
RETRY_STRENGTH = 10.0


class ObjectiveError(ValueError):
    """An objective or time parameter that is not one this release knows (a bad request: exit 2, HTTP 422)."""


def check_objective(name: str) -> Objective:
    if name not in OBJECTIVES:
        raise ObjectiveError(f"unknown objective {name!r}; expected one of: {', '.join(OBJECTIVES)}")
    return name  # type: ignore[return-value]


@dataclass(frozen=True)
class TimeParams:
    """How the `time` objective prices failures: the loop's retry limit, the time a replan loses (None: learned
    from the traces, the mean time of a run's steps) and how many extra replans a side-effect failure costs."""

    max_retries: int = DEFAULT_RETRIES
    replan_ms: float | None = None
    side_effect_weight: float = DEFAULT_SIDE_EFFECT_WEIGHT

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ObjectiveError(f"max_retries must be an integer >= 0, got {self.max_retries!r}")
        for name in ("replan_ms", "side_effect_weight"):
            value = getattr(self, name)
            if value is None and name == "replan_ms":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ObjectiveError(f"{name} must be a finite number >= 0, got {value!r}")


def split_retries(
    p_fail: np.ndarray, attempts: np.ndarray, retries: np.ndarray, failed_retries: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(first attempt's p_fail, a retry's p_fail) of each grounding. The failure model's p_fail counts every
    attempt, retries included: where retries fail together (a service that stays down), that overstates a
    first attempt's chance of failing, so the retries' share is taken back out of it, and the retries priced
    by their own record (`retry_p_fail`)."""
    import numpy as np

    p = np.asarray(p_fail, float)
    attempts, retries = np.asarray(attempts, float), np.asarray(retries, float)
    first = attempts - retries
    split = (retries > 1e-9) & (first > 1e-9)
    p_first = np.where(split, (p * attempts - failed_retries) / np.where(split, first, 1.0), p)
    p_first = np.clip(p_first, 0.0, 1.0)
    return p_first, retry_p_fail(p_first, retries, failed_retries)


def retry_p_fail(p_fail: np.ndarray, retries: np.ndarray, failed_retries: np.ndarray) -> np.ndarray:
    """The chance that a retry fails: the grounding's record of retries, shrunk towards its p_fail (independent
    attempts) by `RETRY_STRENGTH` pseudo-retries. A service that is down for a while fails its retries far more
    often than its first attempts (`portfolio.benchsuite.worlds.timed`'s `sticky` type)."""
    import numpy as np

    p = np.asarray(p_fail, float)
    return np.clip(
        (np.asarray(failed_retries, float) + RETRY_STRENGTH * p) / (np.asarray(retries, float) + RETRY_STRENGTH),
        0.0,
        1.0,
    )


def expected_ms(
    p_fail: np.ndarray,
    success_ms: np.ndarray,
    failure_ms: np.ndarray,
    retried: np.ndarray,
    side_effects: np.ndarray,
    max_retries: int,
    replan_ms: float,
    side_effect_weight: float,
    p_retry: np.ndarray | None = None,
) -> np.ndarray:
    """The expected milliseconds of each step (module docstring), vectorised over groundings. `p_retry`: the
    chance that a retry fails (None: p_fail, independent attempts; `retry_p_fail`)."""
    import numpy as np

    p = np.clip(np.asarray(p_fail, float), 0.0, 1.0)
    p_r = p if p_retry is None else np.clip(np.asarray(p_retry, float), 0.0, 1.0)
    r = np.clip(retried, 0.0, 1.0)
    s = np.clip(side_effects, 0.0, 1.0)
    time = (1.0 - p) * success_ms + p * failure_ms
    success = 1.0 - p
    side = p * s
    reach = p * r  # the chance a first retry happens
    for _ in range(max_retries):
        time = time + reach * ((1.0 - p_r) * success_ms + p_r * failure_ms)
        success = success + reach * (1.0 - p_r)
        side = side + reach * p_r * s
        reach = reach * p_r * r
    ends = np.clip(1.0 - success, 0.0, 1.0)
    return time + replan_ms * (ends + side_effect_weight * side)
