"""What the loop asks its driver to do: `Plan` a task, `Execute` a step, `Sleep`, `Ask` a callback.

`LoopRun.run` (`portfolio.agent.loop_run`) yields these and receives the answer; the drivers in
`portfolio.agent.loop` perform them, synchronously or on an event loop. Its own file because it is the whole
contract between the two: a driver reads these four values and nothing of the loop's decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domains.model import GroundAction, State, Task


@dataclass(frozen=True)
class Plan:
    task: Task
    options: dict


@dataclass(frozen=True)
class Execute:
    step: GroundAction
    state: State
    expected: State


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Ask:
    """Call `fn(*args)`; `blocking` ones (network calls) go to a worker thread under the async driver."""

    fn: Callable[..., Any]
    args: tuple
    blocking: bool = False
