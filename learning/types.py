"""What an object never seen in an argument position starts with: its type's deviation (`learning.model`).

The trace store keeps no types, so at prediction the task's types pool evidence: an object never seen in position
i gets the log-odds by which its type's seen objects fail more (or less) there than the rest of the model predicts
for their groundings, so a new truck of a bad model starts pessimistic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from learning.features import step_tokens
from learning.situations import logit

# How many pseudo-steps of the position's rate smooth a type's pooled rate. Small, because the planner soon
# avoids the siblings of a bad type, so they stop gathering steps: on the `type` worlds (seeds 0-2, 100
# episodes), a new vehicle of the bad type (true 0.5) started at p_fail 0.24 (median) with 10 pseudo-steps,
# 0.28 with 5 and 0.61 [0.47, 0.79] with 2.
TYPE_PSEUDO_STEPS = 2.0


def type_offset(model: Any, position: int, siblings: Iterable[str], prior_mean: float, prior_strength: float) -> float:
    """Log-odds of the failure rate of a type's seen objects in one argument position (smoothed towards the
    position's rate over all seen objects by `TYPE_PSEUDO_STEPS`) over what the model predicts for their
    groundings with the object itself unknown: what an unseen object of that type adds to its prior score.
    0 when the type is all that position has seen, or the model keeps no groundings (an older model)."""
    members = set(siblings)
    steps = failures = 0.0
    for obj in members:
        seen = model.evidence.get(f"a{position}:{obj}")
        if seen is not None:
            steps += seen[0]
            failures += seen[1]
    prefix = f"a{position}:"
    all_steps = sum(v[0] for k, v in model.evidence.items() if k.startswith(prefix))
    all_failures = sum(v[1] for k, v in model.evidence.items() if k.startswith(prefix))
    if steps <= 0 or all_steps - steps <= 1e-9:
        return 0.0
    s0 = prior_strength
    rate = (all_failures + s0 * prior_mean) / (all_steps + s0)
    target = logit((failures + TYPE_PSEUDO_STEPS * rate) / (steps + TYPE_PSEUDO_STEPS))
    get = model.weights.get
    weight = predicted = 0.0
    for grounding, (n, _f, _q) in model.groundings.items():
        args = grounding.split(" ")
        if len(args) <= position or args[position] not in members:
            continue
        args[position] = "\x00unseen"  # no token of the sibling itself: what the rest of the model says
        score = model.intercept + sum(get(t, 0.0) * v for t, v in step_tokens(tuple(args), None, None))
        weight += n
        predicted += n / (1.0 + math.exp(-max(min(score, 500.0), -500.0)))
    if weight <= 0:
        return 0.0
    return target - logit(predicted / weight)
