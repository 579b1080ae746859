"""The order in which arms (planners, configurations, objectives) are timed side by side on the same tasks.

Interleaved: repeat-major, then task, then arm. The arms of one task run back to back, so a change in the load of
a shared machine (another session starting, a long build) falls on every arm of that task alike instead of on
whichever arm happened to run during it; a loop that timed one arm on every task and then the next would turn
load drift into a difference between arms. `runner.plan_runs` plans `portfolio bench run`'s runs in this order,
and the benchmark scripts in `benchmarks/` that time arms side by side iterate over it, so there is one
definition of it.

With `rotate`, the arm that goes first moves on by one at every task (and repeat), so each arm goes first on an
equal share of the tasks and whatever going first costs or gains (the first to read a task's files, say) is
spread over all arms instead of falling on one. (`worlds/latency.py` times its three planners on one task in
this rotating order.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
A = TypeVar("A")


def interleaved(
    tasks: Iterable[T], arms: Sequence[A], repeats: int = 1, rotate: bool = False
) -> Iterator[tuple[int, T, tuple[A, ...]]]:
    """(repeat, task, the arms in the order they run on it) for every repeat and task, repeat-major.

    Without `rotate` every task runs the arms in the given order; with it, the k-th (repeat, task) pair runs
    them starting from arm k mod len(arms). Flattened, `(r, task, arm)` for `arm in order` is the runner's order;
    a task is yielded once with all its arms so a caller can do per-task work (read it, print its row) around
    them. `tasks` is read once (it may be a generator)."""
    tasks = list(tasks)
    order = tuple(arms)
    for repeat in range(repeats):
        for index, task in enumerate(tasks):
            shift = (repeat * len(tasks) + index) % len(order) if rotate and order else 0
            yield repeat, task, order[shift:] + order[:shift]
