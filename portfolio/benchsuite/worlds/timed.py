"""Worlds where tools differ in speed, failure rate and failure kind: the `time` objective's benchmark
(`benchmarks/experiments/time_objective.py`).

The bundled `tools` domain (report jobs: web search + fact-check, a database, or an expert, then a writer), with
a hidden truth per grounded action's tool (`ToolTruth`): how long a success and a failure take, how often an
attempt fails, whether its failures are transient (the loop retries them) and whether they leave side effects.
Three types:

- `speed`: quick-flaky-transient vs slow-solid. web-basic answers in 100 ms and fails 40% of attempts with a
  transient error; web-pro takes 2.5 s and works; databases 3 s, experts 6 s. `risk` takes web-pro (lambda 5:
  web-basic's 2.55 of risk outweighs its 2 units cheaper base), `time` should take web-basic;
- `sticky`: a transient failure that turns permanent. web-basic fails 10% of attempts transiently, but in 30%
  of episodes it is down for good: every attempt fails (transiently), so retries only lose time; the objective's
  independent-attempts model is wrong here on purpose;
- `side-effects`: writer-small writes in 300 ms but 40% of its attempts fail after half-publishing the report
  (a knowledge failure with side effects, never retried); writer-large takes 1 s and works.

Every other tool takes 200 ms and fails 1% (knowledge). Durations carry a gamma noise (coefficient of variation
0.2). `run_episode` executes a plan as the agent loop does (`portfolio.agent.loop_run`): a transient failure
without side effects is retried up to `MAX_RETRIES` times, any other failure (or the last retry's) ends the
plan, costs `REPLAN_MS` and is planned around (the failed grounding excluded, as the loop's refine does), up to
`MAX_REPLANS` replans. Common random numbers: the k-th attempt of a grounded action in an episode has the same
outcome and duration for every arm.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from domains.model import GroundAction, Task

KINDS = ("speed", "sticky", "side-effects")
MAX_RETRIES = 2  # the agent loop's default (`LoopConfig.max_retries`)
MAX_REPLANS = 3
REPLAN_MS = 1000.0  # what a plan-ending failure costs besides its own attempt: the replan and the lost step
NOISE_CV = 0.2
DOWN_SHARE = 0.3  # `sticky`: the share of episodes in which web-basic is down for good


@dataclass(frozen=True)
class ToolTruth:
    p_fail: float
    success_ms: float
    failure_ms: float
    transient: bool = False
    side_effects: bool = False
    p_retry: float | None = None  # the chance a retry fails, when attempts are not independent (`marginal`)


DEFAULT = ToolTruth(0.01, 200.0, 200.0)
_WEB_PRO = ToolTruth(0.01, 2500.0, 2500.0)
_SLOW = {"query-database": ToolTruth(0.01, 3000.0, 3000.0), "ask-expert": ToolTruth(0.01, 6000.0, 6000.0)}
RULES: dict[str, dict[tuple[str, str | None], ToolTruth]] = {
    "speed": {("web-search", "web-basic"): ToolTruth(0.4, 100.0, 100.0, transient=True)},
    "sticky": {("web-search", "web-basic"): ToolTruth(0.1, 100.0, 100.0, transient=True)},
    "side-effects": {
        ("web-search", "web-basic"): ToolTruth(0.01, 100.0, 100.0),
        ("write-report", "writer-small"): ToolTruth(0.4, 300.0, 300.0, side_effects=True),
        ("write-report", "writer-large"): ToolTruth(0.01, 1000.0, 1000.0),
    },
}


def truth(kind: str, step: GroundAction) -> ToolTruth:
    """The hidden parameters of `step` in a world of type `kind` (the tool is the step's last argument)."""
    rules = RULES[kind]
    tool = step.args[-1] if step.args else None
    found = rules.get((step.name, tool)) or rules.get((step.name, None))
    if found is not None:
        return found
    if step.name == "web-search" and tool == "web-pro":
        return _WEB_PRO
    return _SLOW.get(step.name, DEFAULT)


def marginal(kind: str, step: GroundAction) -> ToolTruth:
    """What an oracle knows of `step` without the episode's hidden coin: in `sticky`, web-basic's per-attempt
    rate averaged over the episodes it is down in, and the chance that a retry after a failure fails too."""
    found = truth(kind, step)
    if kind == "sticky" and step.name == "web-search" and step.args[-1:] == ("web-basic",):
        first = DOWN_SHARE + (1 - DOWN_SHARE) * found.p_fail
        again = (DOWN_SHARE + (1 - DOWN_SHARE) * found.p_fail**2) / first
        return ToolTruth(first, 100.0, 100.0, transient=True, p_retry=again)
    return found


@dataclass
class Attempt:
    step: GroundAction
    failed: bool
    ms: float
    transient: bool
    side_effects: bool
    ends_plan: bool = False  # a failure not retried: the plan ends, a replan follows


@dataclass
class Episode:
    """One episode as one arm ran it: every attempt, the plans asked for, and how it ended."""

    attempts: list[Attempt] = field(default_factory=list)
    plans: int = 0
    reached: bool = False

    @property
    def ms(self) -> float:
        """Time spent: every attempt, plus `REPLAN_MS` per plan-ending failure."""
        return sum(a.ms + (REPLAN_MS if a.ends_plan else 0.0) for a in self.attempts)

    @property
    def side_effect_failures(self) -> int:
        return sum(1 for a in self.attempts if a.failed and a.side_effects)


def attempt(kind: str, world: str, episode: int, step: GroundAction, occurrence: int) -> Attempt:
    """The `occurrence`-th attempt of `step` in an episode: the same for every arm (common random numbers)."""
    rng = random.Random(f"{world}:{episode}:{step}:{occurrence}")
    found = truth(kind, step)
    down = kind == "sticky" and found.transient and random.Random(f"{world}:{episode}:down").random() < DOWN_SHARE
    failed = down or rng.random() < found.p_fail
    mean = found.failure_ms if failed else found.success_ms
    shape = 1.0 / NOISE_CV**2
    return Attempt(step, failed, mean * rng.gammavariate(shape, 1.0 / shape), found.transient, found.side_effects)


Plan = Callable[[Task, frozenset, Sequence[GroundAction]], Sequence[GroundAction] | None]


def run_episode(kind: str, world: str, index: int, task: Task, plan: Plan) -> Episode:
    """Execute as the agent loop does (module docstring); `plan(task, state, excluded)` gives the steps (None:
    no plan). A transient failure's retry is the step's next attempt."""
    from domains.validate import apply, goal_reached

    out, state = Episode(), task.problem.init
    excluded: list[GroundAction] = []
    seen: dict[GroundAction, int] = {}
    while out.plans <= MAX_REPLANS:
        steps = plan(task, state, excluded)
        out.plans += 1
        if steps is None:
            return out
        ended = False
        for step in steps:
            for retry in range(MAX_RETRIES + 1):
                seen[step] = occurrence = seen.get(step, -1) + 1
                done = attempt(kind, world, index, step, occurrence)
                out.attempts.append(done)
                if not done.failed:
                    break
                if not (done.transient and not done.side_effects and retry < MAX_RETRIES):
                    ended = done.ends_plan = True
                    break
            if ended:
                excluded.append(step)
                break
            state = apply(task, state, step)
        if not ended:
            out.reached = goal_reached(task, state)
            return out
    return out
