"""The planner's learned costs, cached: what `Planner` hands its delegates (moved out of `portfolio.planner`).

Posteriors (p_fail and, for the `time` objective, durations) depend on the model, the task, the situation and
the grounding list, not on lambda or the exploration policy, so they are computed once per such key; cautious
costs are cached per lambda too, and a thompson or optimistic call prices the cached posteriors afresh (one
vectorised draw). The cache is the planner's, guarded by its lock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from domains.model import Task
    from learning.costs import ActionCost
    from learning.explore import Explore
    from learning.model import FailureModel
    from learning.objective import Objective, TimeParams

MAX_ENTRIES = 256


def check_weight(weight: float) -> float:
    """The lambda of learned costs: a finite number >= 0 (0 plans on base costs alone)."""
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not math.isfinite(weight) or weight < 0:
        raise ValueError(f"weight must be a finite number >= 0, got {weight!r}")
    return float(weight)


def cached_costs(
    cache: dict[tuple[Any, ...], Any],
    model: FailureModel | None,
    task: Task,
    grounded: Sequence[str],
    features: dict[str, Any] | None,
    explore: Explore,
    lam: float,
    objective: Objective,
    time: TimeParams | None,
    rng: Callable[[], np.random.Generator],
) -> dict[str, ActionCost]:
    """Costs of `grounded` under `explore`, `lam` and `objective` (`time`: its parameters, when the objective is
    time), from `cache` (module docstring); `rng()` gives the generator for draws."""
    from learning.costs import action_posteriors, priced
    from learning.explore import explore_policy

    key: tuple[Any, ...] = (task.fingerprint, tuple(sorted((features or {}).items())), len(grounded))
    key += (hash(tuple(grounded)),) + (("time",) if time else ())
    cached = cache.get(key)
    if cached is None:
        from domains.ground_text import parse_ground_action

        actions = [parse_ground_action(text) for text in grounded]
        cached = action_posteriors(model, task, actions, features=features, objective=objective)
        if len(cache) > MAX_ENTRIES:
            cache.clear()
        cache[key] = cached
    if explore_policy(explore) == "cautious":  # deterministic, so cached
        costs: dict[str, ActionCost] | None = cache.get((key, "cautious", lam))
        if costs is None:
            costs = cache[(key, "cautious", lam)] = priced(cached, lam, "cautious", time=time)
        return costs
    return priced(cached, lam, explore, rng(), time)
