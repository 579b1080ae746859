"""Plan quality with learned costs on the bundled domains' tasks (the project's target reads "on the benchmark's
tasks and the bundled ones"): is the plan the default cascade returns the cheapest under the costs it planned
with?

    rows = bundled_quality(episodes=30)      # per (domain, size): scores.quality(...) plus unproved, seconds

Per bundled task shape (`TASKS`: blocksworld, gripper, logistics and tools at two sizes each), a hidden truth:
one grounded action in `BAD_EVERY` fails 50% of the time (chosen by a hash of the action, so the same groundings
fail in every problem of that size), every other 2%. A learned `Planner(traces=..., cost_weight=5)` with the
default cascade plans `episodes` problems of that size (the generator's seeds `first_problem`, +1, ...; 0-29 were
the tuning tasks of the anytime search, `portfolio.delegates.fast_downward.searches._ANYTIME`, so the default starts at
100),
each executed in
simulation and recorded, retrained every `retrain_every`; every call made with learned costs is compared with
the optimum under the very same costs (`exact.ExactSearch`: A* with LM-cut, `budget_s` per task). Where the
exact search cannot prove an optimum in its budget the call is counted as `unproved`, never compared; a call
with learned costs that returns no plan is counted as `unsolved`. The first model exists after the first
retrain, so calls before it (planned on the task's own costs) are not compared.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass

from domains.model import GroundAction

TASKS = (
    ("blocksworld", 6),
    ("blocksworld", 8),
    ("gripper", 4),
    ("gripper", 8),
    ("logistics", 4),
    ("logistics", 6),
    ("tools", 3),
    ("tools", 6),
)
BAD_EVERY = 8
BAD_P, DEFAULT_P = 0.5, 0.02


@dataclass(frozen=True)
class BundledWorld:
    """The hidden truth for one (domain, size): what `runner.execute` needs of a world."""

    domain: str
    size: int

    @property
    def name(self) -> str:
        return f"bundled-{self.domain}-{self.size}"

    def p_fail(self, step: GroundAction, spec=None) -> float:
        return BAD_P if zlib.crc32(f"{self.name}:{step}".encode()) % BAD_EVERY == 0 else DEFAULT_P


FIRST_PROBLEM = 100  # held out: problems 0-29 were tuned on


def bundled_quality(
    episodes: int = 30, retrain_every: int = 5, tasks=TASKS, budget_s: float = 20.0, first_problem: int = FIRST_PROBLEM
) -> dict:
    """Per "domain-size": the quality summary (`scores.quality`) of the learned calls, with `unproved` (calls
    whose optimum the exact search could not prove within `budget_s`) and `seconds`."""
    from domains.bundled import bundled_task
    from domains.pddl_writer import formula_to_pddl
    from learning.retrain import retrain
    from portfolio.benchsuite.worlds.exact import CostRecorder, ExactError, ExactSearch, quality_call
    from portfolio.benchsuite.worlds.model import Episode
    from portfolio.benchsuite.worlds.runner import LAM, execute_and_record
    from portfolio.benchsuite.worlds.scores import quality
    from portfolio.planner import Planner

    out: dict = {}
    for domain, size in tasks:
        start = time.perf_counter()
        world = BundledWorld(domain, size)
        calls, unproved, unsolved = [], 0, 0
        exact = ExactSearch(domain, budget_s=budget_s)
        learner = Planner(traces=":memory:", cost_weight=LAM)
        recorder = CostRecorder(learner)
        try:
            for index in range(episodes):
                task = bundled_task(domain, size, first_problem + index)
                spec = Episode(index, "", "", {})
                store = learner.store
                assert store is not None  # the learner's in-memory trace store
                run_id = store.start_run(task.fingerprint, formula_to_pddl(task.problem.goal), run_id=f"e{index}")
                result = learner.plan(task, run_id=run_id)
                if learner.model is not None and not result.solved:
                    unsolved += 1  # a call with learned costs that returned no plan: counted, never hidden
                if result.solved and recorder.costs:
                    costs = recorder.costs
                    try:
                        optimum = exact.solve(task, costs)
                    except ExactError:
                        unproved += 1
                    else:
                        calls.append(quality_call(index, task, result, optimum, costs))
                execute_and_record(world, task, result, spec, store, run_id)  # no context: features {}
                if (index + 1) % retrain_every == 0 and store.count_steps():
                    retrain(store, holdout_fraction=0.0)
                    learner.reload_model()
        finally:
            learner.close()
            exact.close()
        out[f"{domain}-{size}"] = (quality(calls) or {"calls": 0}) | {
            "unproved": unproved,
            "unsolved": unsolved,
            "seconds": round(time.perf_counter() - start, 1),
        }
    return out
