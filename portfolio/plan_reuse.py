"""Plan reuse: a replan whose caller passes the rest of the plan it is executing (`previous_plan`) first asks
whether that suffix still works: valid from the observed state (the validator simulates it), free of excluded
actions, made under the same cost model (`PlanResult.cost_model`: the task's own costs, or learned costs of one
model generation, exploration policy and situation; never under Thompson sampling, which draws new costs on
every call). If so it is returned at once as `delegate: "plan-reuse"`: a simulation of a few steps instead
of a translation and a search process. When the state is not one the plan predicted, later suffixes are tried
too (an action the plan still needed may have happened anyway); otherwise the cascade plans again. The result
is the same plan the cascade would have kept executing, so reuse never changes what the agent does when the
world behaves as predicted; it only stops paying for the question.
"""

from __future__ import annotations

from collections.abc import Sequence

from domains.ground_text import normalise_actions, parse_ground_action
from domains.model import GroundAction, Plan, State, Task, plan_cost
from domains.validate import validate_plan
from portfolio.engine.results import Attempt, PlanResult, Status, elapsed_ms_since

REUSE_DELEGATE = "plan-reuse"


def reusable_suffix(
    task: Task, init: State, steps: Sequence[GroundAction | str], excluded: frozenset[str] = frozenset()
) -> tuple[int, Plan] | None:
    """(offset, suffix): the longest suffix `steps[offset:]` that is valid from `init` and uses no excluded
    action, or None. Offset 0 is the common case (the state is the one the plan predicted); later offsets
    cover an action that happened without the plan (its effect is already there). A suffix is only
    simulated when its first step is not excluded, and excluded steps rule out every suffix that holds them."""
    actions = [parse_ground_action(s) if isinstance(s, str) else s for s in steps]
    if not actions:
        return None
    last_banned = max((i for i, a in enumerate(actions) if excluded and str(a) in excluded), default=-1)
    for offset in range(last_banned + 1, len(actions)):
        if validate_plan(task, actions[offset:], init=init).ok:  # unknown actions fail validation, not raise
            return offset, actions[offset:]
    return None


def reused_plan(
    task: Task,
    init: State | None,
    previous: Sequence[GroundAction | str],
    excluded: Sequence[GroundAction | str],
    previous_cost_model: str | None,
    cost_model: str | None,
    start: float,
) -> PlanResult | None:
    """The plan-reuse result, or None when the previous plan cannot be kept (module docstring); `start` is the
    call's `time.monotonic()` start, for its `elapsed_ms`."""
    if not previous or cost_model is None:
        return None
    if previous_cost_model is not None and previous_cost_model != cost_model:
        return None
    state = task.problem.init if init is None else frozenset(init)
    found = reusable_suffix(task, state, previous, normalise_actions(excluded))
    if found is None:
        return None
    offset, suffix = found
    ms = elapsed_ms_since(start)
    attempt = Attempt(
        delegate=REUSE_DELEGATE,
        status=Status.SOLVED,
        elapsed_ms=ms,
        reason=f"the previous plan's steps {offset + 1}..{len(previous)} are still valid",
        details={"offset": offset, "previous_length": len(previous)},
    )
    return PlanResult(
        status=Status.SOLVED,
        plan=[str(step) for step in suffix],
        cost=plan_cost(task, suffix),
        delegate=REUSE_DELEGATE,
        attempts=[attempt],
        elapsed_ms=ms,
        source="classical",
        cost_model=cost_model,
    )
