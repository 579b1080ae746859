"""Greedy action elimination: drop the steps a valid plan does not need.

Satisficing searches return plans with steps that achieve nothing the goal needs: greedy best-first search
follows its heuristic, and weighted A* is only bounded to w times the optimal cost. For an agent each such step
is work, time and (under learned costs) one more chance to fail. Measured in the `tools` world of
`portfolio bench learning` (seeds 3 and 7, last 50 of 200 episodes): every episode where the learned arm's plan
was more than 0.03 less likely to succeed than the oracle's (5 and 1 of them) was one where the plan was dearer
under the learner's *own* costs, and in all but one the extra cost was steps no goal needed (e.g. three
`query-database` steps before three `write-report` steps that need none of them).

The algorithm is Nakhost & Müller's greedy action elimination ("Action Elimination and Plan Neighborhood Graph
Search", ICAPS 2009), after Fink & Yang's justified plans: for each step i in order, run the rest of the plan from
the state before i without step i, also skipping every later step that is no longer applicable; if the goal holds
at the end, the skipped steps are gone for good. Every plan it passes through is valid, so it can stop at any
time (a deadline) and return the best so far. Cost: a trial runs at most the n - i steps after i, so O(n^2) steps
simulated in the worst case; plans of agent tasks (tens of steps) take milliseconds.

Removing steps never raises a plan's cost while every action cost is >= 0, which PDDL's are, and so are risk
costs. It is a post-processing step, not a search: what it returns is a subsequence of what it was given.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from domains.model import GroundAction, State, Task
from domains.validate import goal_reached, successor


def _run_without(task: Task, state: State, steps: Sequence[GroundAction], skip: int) -> tuple[list[int], bool]:
    """Run `steps` from `state` without `steps[skip]`; also skip each later step that is not applicable.
    Returns the indices kept after `skip` and whether the goal holds at the end."""
    kept: list[int] = []
    for index in range(skip + 1, len(steps)):
        after = successor(task, state, steps[index])
        if after is not None:
            state = after
            kept.append(index)
    return kept, goal_reached(task, state)


def eliminate(
    task: Task, plan: Sequence[GroundAction], init: State | None = None, deadline: float | None = None
) -> list[GroundAction]:
    """`plan` without the steps the goal does not need (greedy action elimination). `plan` must be valid from
    `init` (the task's initial state by default); the result is a valid subsequence of it. `deadline`
    (time.monotonic()): stop there and return the plan as reduced so far."""
    steps = list(plan)
    state: State = frozenset(task.problem.init if init is None else init)
    index = 0
    while index < len(steps):
        if deadline is not None and time.monotonic() >= deadline:
            break
        kept, reached = _run_without(task, state, steps, index)
        if reached:
            steps = steps[:index] + [steps[i] for i in kept]
            continue  # the step now at `index` is a new one: try it too
        after = successor(task, state, steps[index])
        assert after is not None, "eliminate() needs a valid plan"
        state, index = after, index + 1
    return steps
