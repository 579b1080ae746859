"""Learned costs on the competition's worlds: IPPC 2008 probabilistic domains (PPDDL, `../shared/ippc/`).

    python -m benchmarks.ippc --domains blocksworld,ex-blocksworld-fixed --problems 5 --runs 20     # ~3 min

The planner gets a deterministic domain: each `(probabilistic p1 e1 p2 e2 ...)` is replaced by the action's
intended outcome. When the probabilistic effect is the whole effect, the intended outcome is the first one listed
(blocksworld's `pick-tower` succeeds 1/10: its listed outcome is its purpose); when it sits beside deterministic
effects (ex-blocksworld's "the table may be destroyed"), it is a side effect and the intended outcome is the
remainder, nothing happening. The simulator samples the PPDDL outcomes: each outcome is an action variant
(`<name>--o<i>`) of a simulation domain, applied by the validator's `apply`. A step whose sampled outcome is not
the intended one is a failure in the traces; every arm replans from the state it is in after a failure, up to
`MAX_STEPS` executed steps (a dead end, where no plan exists, ends the run as a failure).

Arms: cost-blind (FF-Replan's strategy: the deterministic domain, replanning), learned (`Planner(traces=...)`,
retraining after every run), oracle (true costs: base + lam * -log P(intended outcome)). Reported per problem:
success rate within the step limit and mean executed steps.

Supported: one `probabilistic` per action, outcomes of plain and conditional effects (blocksworld,
ex-blocksworld-fixed). boxworld (the domain inside each problem) and zenotravel (probabilistic durations) are
not run yet.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Sequence

if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domains.model import GroundAction, Task  # noqa: E402
from domains.sexpr import SList, read_sexpr  # noqa: E402

IPPC_DIR = Path(__file__).resolve().parents[2] / "shared" / "ippc"
MAX_STEPS = 60
LAM = 5.0


def to_text(node) -> str:
    if isinstance(node, list):
        return "(" + " ".join(to_text(x) for x in node) + ")"
    return str(node)


@dataclass
class Outcome:
    probability: float
    effect: object  # the s-expression replacing the probabilistic block (None: nothing happens)


@dataclass
class ProbAction:
    name: str
    outcomes: list[Outcome]  # sampled alternatives, the remainder ("nothing") included when it has mass
    intended: int


@dataclass
class Determinized:
    planning_domain: str
    simulation_domain: str
    actions: dict[str, ProbAction] = field(default_factory=dict)

    def p_intended(self, name: str) -> float:
        action = self.actions.get(name)
        return 1.0 if action is None else action.outcomes[action.intended].probability


def _find_probabilistic(node, path=()):
    """Paths to every (probabilistic ...) sub-expression."""
    if isinstance(node, list):
        if node and node[0] == "probabilistic":
            yield path
        for i, child in enumerate(node):
            yield from _find_probabilistic(child, path + (i,))


def _replace(node, path, new):
    if not path:
        return new
    copy = list(node)
    copy[path[0]] = _replace(node[path[0]], path[1:], new)
    return copy


def _at(node, path):
    for i in path:
        node = node[i]
    return node


def determinize(domain_text: str) -> Determinized:
    """The planning domain (intended outcomes) and the simulation domain (one action per outcome)."""
    root = read_sexpr(domain_text)[0]
    planning, simulation = [], []
    actions: dict[str, ProbAction] = {}
    for section in root:
        if isinstance(section, list) and section and section[0] == ":requirements":
            keep = [r for r in section[1:] if r not in (":probabilistic-effects", ":rewards")]
            section = [":requirements", *keep]
        if not (isinstance(section, list) and section and section[0] == ":action"):
            planning.append(section)
            simulation.append(section)
            continue
        name = section[1]
        effect_index = section.index(":effect") + 1
        effect = section[effect_index]
        paths = list(_find_probabilistic(effect))
        if not paths:
            planning.append(section)
            simulation.append(section)
            continue
        if len(paths) > 1:
            raise ValueError(f"action {name}: more than one probabilistic effect is not supported")
        block = _at(effect, paths[0])
        outcomes = [Outcome(float(Fraction(block[i])), block[i + 1]) for i in range(1, len(block), 2)]
        rest = 1.0 - sum(o.probability for o in outcomes)
        if rest > 1e-9:
            outcomes.append(Outcome(rest, None))
        intended = 0 if not paths[0] else (len(outcomes) - 1 if outcomes[-1].effect is None and rest >= 0.5
                                           else max(range(len(outcomes)), key=lambda i: outcomes[i].probability))
        actions[name] = ProbAction(name, outcomes, intended)
        for i, outcome in enumerate(outcomes):
            variant = list(section)
            variant[1] = f"{name}--o{i}"
            variant[effect_index] = _replace(effect, paths[0], outcome.effect if outcome.effect is not None
                                             else ["and"])
            simulation.append(variant)
            if i == intended:
                planned = list(variant)
                planned[1] = name
                planning.append(planned)
    return Determinized(to_text(planning), to_text(simulation), actions)


def clean_problem(text: str) -> str:
    """The problem definition (some files hold the domain too) without PPDDL's reward and metric."""
    root = next(d for d in read_sexpr(text) if isinstance(d[1], list) and d[1][0] == "problem")
    return to_text([s for s in root if not (isinstance(s, list) and s and s[0] in (":goal-reward", ":metric"))])


@dataclass
class RunStats:
    success: list[bool] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)


def simulate(det: Determinized, sim_task: Task, state, step: GroundAction, rng: random.Random):
    """Sample the step's outcome; the next state and whether the outcome was the intended one."""
    from domains.validate import apply

    action = det.actions.get(step.name)
    if action is None:
        return apply(sim_task, state, step), True
    r, acc = rng.random(), 0.0
    chosen = len(action.outcomes) - 1
    for i, outcome in enumerate(action.outcomes):
        acc += outcome.probability
        if r < acc:
            chosen = i
            break
    return apply(sim_task, state, GroundAction(f"{step.name}--o{chosen}", step.args)), chosen == action.intended


def run_once(det, task, sim_task, plan_fn, rng, record=None) -> tuple[bool, int]:
    """Plan, execute, replan after each failure; (goal reached, steps executed)."""
    from domains.validate import goal_reached

    state, executed = task.problem.init, 0
    while executed < MAX_STEPS:
        result = plan_fn(state)
        if not result.solved:
            return False, executed
        for step in result.actions():
            state, ok = simulate(det, sim_task, state, step, rng)
            executed += 1
            if record is not None:
                record(step, ok)
            if not ok or executed >= MAX_STEPS:
                break
        if goal_reached(task, state):
            return True, executed
    return goal_reached(task, state), executed


def evaluate(domain: str, problems: int, runs: int, retrain_every: int = 1) -> dict:
    from domains.pddl import parse_task
    from learning.costs import risk_cost
    from learning.retrain import retrain
    from portfolio.planner import CLASSICAL_ONLY, Planner, default_stages
    from portfolio.results import PlanRequest, parse_ground_action
    from traces.records import StepRecord

    folder = IPPC_DIR / domain
    det = determinize((folder / "domain.pddl").read_text())
    stages = lambda: default_stages(CLASSICAL_ONLY, budget_s=10.0)  # noqa: E731
    out: dict = {}
    with Planner(stages(), budget_s=10.0) as plain, \
            Planner(stages(), budget_s=10.0, traces=":memory:", cost_weight=LAM) as learner:
        store = learner.store
        for problem in sorted(folder.glob("p*.pddl"))[:problems]:
            text = clean_problem(problem.read_text())
            task = parse_task(det.planning_domain, text, f"{domain}-det", problem.name)
            sim_task = parse_task(det.simulation_domain, text, f"{domain}-sim", problem.name)

            def oracle_costs(grounded: Sequence[str], task=task) -> dict[str, float]:
                return {g: 1.0 + risk_cost(1.0 - det.p_intended(parse_ground_action(g).name), LAM) for g in grounded}

            stats = {arm: RunStats() for arm in ("cost-blind", "learned", "oracle")}
            for run in range(runs):
                for arm, stat in stats.items():
                    rng = random.Random(f"{domain}:{problem.name}:{run}")  # the same luck sequence for every arm
                    record = None
                    if arm == "cost-blind":
                        plan_fn = lambda s, task=task: plain.plan(task, init=s)  # noqa: E731
                    elif arm == "oracle":
                        plan_fn = lambda s, task=task: plain.cascade.solve(  # noqa: E731
                            PlanRequest(task=task, init=s, cost_model=oracle_costs))
                    else:
                        run_id = store.start_run(task.fingerprint, None, run_id=f"{problem.name}-{run}")
                        steps: list[StepRecord] = []
                        plan_fn = lambda s, task=task, run_id=run_id: learner.plan(task, init=s, run_id=run_id)  # noqa: E731

                        def record(step, ok, steps=steps, run_id=run_id):
                            steps.append(StepRecord(run_id=run_id, step=len(steps), action=step.name, args=step.args,
                                                    outcome="success" if ok else "failure"))
                    ok, n = run_once(det, task, sim_task, plan_fn, rng, record)
                    stat.success.append(ok)
                    stat.steps.append(n)
                    if arm == "learned":
                        store.record_steps(steps)
                        store.end_run(run_id, "success" if ok else "failure")
                        if (run + 1) % retrain_every == 0 and store.count_steps():
                            retrain(store, holdout_fraction=0.0)
                            learner.reload_model()
            out[problem.name] = {arm: {"success": round(statistics.mean(s.success), 3),
                                       "mean_steps": round(statistics.mean(s.steps), 2)} for arm, s in stats.items()}
            print(domain, problem.name, out[problem.name], file=sys.stderr, flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", default="blocksworld,ex-blocksworld-fixed")
    parser.add_argument("--problems", type=int, default=2)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    lines = ["| domain | problem | arm | success | mean executed steps |", "|---|---|---|---|---|"]
    for domain in args.domains.split(","):
        for problem, arms in evaluate(domain, args.problems, args.runs).items():
            for arm, s in arms.items():
                lines.append(f"| {domain} | {problem} | {arm} | {s['success']:.2f} | {s['mean_steps']:.1f} |")
    print("\n".join(lines))
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
