"""The learning evaluation's simulated episodes: which task and situation each episode draws, and what happens
when a plan is executed in it.

`make_episodes` draws the episodes every arm plays (a bundled `tools` task and a situation each, the same for a
given seed); `execute` runs a plan step by step from the task's initial state, each step failing with its true
probability in the episode's situation (`portfolio.benchsuite.worlds.tools.true_p_fail`), and stops at the first
failure; `step_fails` gives every arm the same draw for the same execution of the same step (common random
numbers). Its own file because it is the world the harness (`learning_eval`) plays, not the harness: nothing here
plans, learns or records, and the tests check the world's books apart from the arms.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.experiments.learning_data import DOMAIN
from domains.bundled import bundled_task
from domains.model import GroundAction, Task
from domains.validate import applicable, apply, goal_reached
from portfolio.benchsuite.worlds.tools import true_p_fail

SIZES = (2, 3, 4)
TASK_SEEDS = tuple(range(10))
CONTEXT_VALUES = {"hour": ("peak", "off-peak"), "region": ("eu", "us")}


# -- the hidden world: portfolio/benchsuite/worlds/tools.py (WORLD_RULES, true_p_fail), imported above -----------


def step_fails(seed: int, episode: int, step: GroundAction, occurrence: int, p_fail: float) -> bool:
    """Common random numbers: the `occurrence`-th execution of `step` in `episode` draws the same uniform number
    for every arm (string seeds hash the same on every run and platform)."""
    return random.Random(f"{seed}:{episode}:{step}:{occurrence}").random() < p_fail


# -- episodes ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeSpec:
    index: int
    size: int
    task_seed: int
    context: dict[str, str]

    def task(self) -> Task:
        return bundled_task(DOMAIN, self.size, self.task_seed)


def make_episodes(n: int, seed: int = 0) -> list[EpisodeSpec]:
    """`n` episodes (task and situation), the same for a given seed; every arm plays this list."""
    rng = random.Random(f"learning-eval-{seed}")
    episodes = []
    for index in range(n):
        size, task_seed = rng.choice(SIZES), rng.choice(TASK_SEEDS)
        context = {key: rng.choice(values) for key, values in CONTEXT_VALUES.items()}
        episodes.append(EpisodeSpec(index, size, task_seed, context))
    return episodes


@dataclass
class Execution:
    steps: list[tuple[GroundAction, bool]]  # (step, failed) for every executed step, the failed one last
    success: bool


def execute(task: Task, plan: Sequence[GroundAction], spec: EpisodeSpec, seed: int) -> Execution:
    """Run `plan` in simulation from the task's initial state; stop at the first failed step (no replanning)."""
    state = task.problem.init
    executed: list[tuple[GroundAction, bool]] = []
    seen: dict[GroundAction, int] = {}
    for step in plan:
        if not applicable(task, state, step):  # plans come validated: this would be a harness bug
            raise RuntimeError(f"episode {spec.index}: {step} is not applicable in simulation")
        occurrence = seen[step] = seen.get(step, -1) + 1
        failed = step_fails(seed, spec.index, step, occurrence, true_p_fail(step, spec.context))
        executed.append((step, failed))
        if failed:
            return Execution(executed, False)
        state = apply(task, state, step)
    return Execution(executed, goal_reached(task, state))
