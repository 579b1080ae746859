"""Play one generated world's episodes under every arm: cost-blind, learned (per explore policy) and oracle.

    run = run_world(make_world("pairs", 3), episodes=200)          # a WorldRun: success, expected, calibration
    runs = run_worlds([("pairs", 100), ("type", 100)], jobs=2)     # several worlds, in parallel processes

Arms, all through the public API on the same episodes, with common random numbers (the k-th execution of a
grounded step in an episode succeeds or fails alike for every arm):

    cost-blind       `Planner()` without traces: the task's own costs (FF-Replan's determinization);
    learned-<policy> `Planner(traces=..., explore=policy)` for policy in cautious, thompson, optimistic, starting
                     from an empty store; every executed step is recorded with the episode's situation as features and
                     the model is retrained every K episodes (`retrain`, `reload_model`);
    oracle           the optimal plan under the true costs, base + lam * -log(1 - p_true) (`exact.ExactSearch`:
                     Dijkstra for the routes domain, Fast Downward A* with LM-cut for the others).

The measured arms (cost-blind and learned) plan every type with the default cascade, exactly as `portfolio
plan` and `Planner(traces=...)` do by default: no `stages=` override, the default budgets, warm planners (a
runtime keeps its Planner). So whatever the default search is, both arms get it, and the exact oracle shows
what it costs. Every learned call also records its plan quality (`WorldRun.quality`): the returned plan's cost
under the very costs the call planned with (`exact.CostRecorder`), the optimum under those same costs (the
exact search), and the call's latency against the 1 s budget; every arm counts which delegate and search
answered (`WorldRun.searches`) and what its plans cost under the true model (`WorldRun.true_cost`: success alone
rewards a learner that pays for caution). Each learned call's predicted plan success is kept beside its outcome
(`WorldRun.predicted`, for `adapt.scores`); in changing worlds (`World.events`) each arm's use and failures of
the watched steps per episode (`WorldRun.watched`) give how fast it left them and came back (`WorldRun.shifts`).

An episode: plan, execute step by step in simulation, stop at the first failure (plan choice, not recovery). Each
learned arm's store is in memory, or a file kept for inspection (`traces_dir`, never an existing one). `latency_rounds`
adds each learned arm's warm latency apart from the episodes (`latency.py`). Worlds are independent, so
`run_worlds(jobs=N)` runs N at once in spawned processes (not forked: a child would inherit the parent's planner
threads and locks); how long a world takes: docs/benchmarks.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol

from domains.model import GroundAction, action_cost
from domains.validate import applicable, apply
from learning.explore import EXPLORE_POLICIES
from portfolio.benchsuite.worlds.family import NEW_VEHICLES_AT, World, make_world

POLICIES = EXPLORE_POLICIES
LAM = 5.0
CONSISTENCY_STEPS = 30  # groundings with at least this many recorded steps are checked for consistency
SIBLING_STEPS = 100  # the target: a new object of a bad type, after 100 steps of its siblings


@dataclass
class WorldRun:
    """One world's episodes under every arm."""

    world: str
    kind: str
    episodes: int
    success: dict[str, list[bool]] = field(default_factory=dict)
    expected: dict[str, list[float]] = field(default_factory=dict)  # true probability the chosen plan succeeds
    true_cost: dict[str, list[float | None]] = field(default_factory=dict)  # the plan's, as the oracle prices it
    calibration: dict[str, dict] = field(default_factory=dict)  # per learned policy
    new_object: dict[str, dict] = field(default_factory=dict)  # `type`, per policy: see `new_object_report`
    new_object_100: dict[str, dict] = field(default_factory=dict)  # the same, once siblings have 100 steps
    # per learned policy, one entry per solved call: {"cost", "optimum"} under the costs it planned with,
    # "ms" (the call's latency), "budget_ms"
    quality: dict[str, list[dict]] = field(default_factory=dict)
    searches: dict[str, dict[str, int]] = field(default_factory=dict)  # per arm: "delegate/search" -> calls
    latency_ms: dict[str, list[float]] = field(default_factory=dict)  # per measured arm: every call's elapsed_ms
    latency: dict[str, dict] = field(default_factory=dict)  # per learned policy: `latency.Latency` as a dict
    seconds: float = 0.0
    # per learned arm and episode: the call's predicted plan success (`PlanResult.success_probability`), None
    # without one (no model yet, no plan)
    predicted: dict[str, list[float | None]] = field(default_factory=dict)
    # changing worlds (`World.events`, `World.watched`): when the truth changed, per arm and episode (watched steps
    # in the plan, watched steps that failed), and per arm what it did after each event (`adapt.shifts`)
    events: list[tuple[int, str]] = field(default_factory=list)
    watched: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    shifts: dict[str, list[dict]] = field(default_factory=dict)


def answered_by(result) -> str:
    """ "delegate/search" of the attempt that gave the plan (e.g. "fast-downward/lama-first"), or the status."""
    if not result.solved:
        return f"unsolved/{result.status.value}"
    attempt = next(
        (a for a in reversed(result.attempts) if a.delegate == result.delegate and a.status.value == "solved"), None
    )
    search = attempt.details.get("search") if attempt is not None else None
    return f"{result.delegate}/{search}" if search else str(result.delegate)


def true_cost(world: World, task, spec, step: GroundAction) -> float:
    """A step's cost under the true model: base + `LAM` * -log(1 - the world's true p_fail)."""
    from learning.costs import risk_cost

    return action_cost(task, step) + risk_cost(world.p_fail(step, spec), LAM)


def true_costs(world: World, task, spec) -> Callable[[Sequence[str]], dict[str, float]]:
    """The oracle's cost model: `true_cost` per grounded action (PDDL text)."""
    from domains.ground_text import parse_ground_action

    return lambda grounded: {text: true_cost(world, task, spec, parse_ground_action(text)) for text in grounded}


class HiddenTruth(Protocol):
    """What `execute` needs of a world (a generated `World`, a `bundled.BundledWorld`): its name and how likely
    each step is to fail."""

    @property
    def name(self) -> str: ...

    def p_fail(self, step: GroundAction, spec: Any) -> float: ...


def fails(world: HiddenTruth, spec, step: GroundAction, occurrence: int) -> bool:
    """Whether the `occurrence`-th execution (0 first) of `step` in episode `spec` fails: the arms' common random
    numbers. The uniform draw is seeded by (world, episode, grounding, occurrence) alone, never by the arm, the
    plan or the step's position in it, so two arms that execute the same grounding for the same time in an
    episode see the same outcome, whatever else their plans hold. Each draw is one uniform compared with the
    true p_fail, so every step still fails with exactly its world's probability; distinct seeds (SHA-512 of the
    string) make the draws of different steps and episodes independent."""
    return random.Random(f"{world.name}:{spec.index}:{step}:{occurrence}").random() < world.p_fail(step, spec)


def execute(world: HiddenTruth, task, plan: Sequence[GroundAction], spec) -> list[tuple[GroundAction, bool]]:
    """Steps executed, each with whether it failed (`fails`); stops at the first failure. A step that is not
    applicable raises RuntimeError: plans come validated, so that would be a bug of the harness."""
    state, done = task.problem.init, []
    seen: dict[GroundAction, int] = {}
    for step in plan:
        if not applicable(task, state, step):
            raise RuntimeError(f"{world.name}, episode {spec.index}: {step} is not applicable in simulation")
        seen[step] = occurrence = seen.get(step, -1) + 1
        failed = fails(world, spec, step, occurrence)
        done.append((step, failed))
        if failed:
            break
        state = apply(task, state, step)
    return done


def execute_and_record(world: HiddenTruth, task, result, spec, store, run_id: str) -> list[tuple[GroundAction, bool]]:
    """`execute` the plan of `result` (nothing when unsolved) and record its steps, with the episode's context as
    features, and the run's outcome under `run_id` in `store`: what a learner observes of an episode."""
    from traces.records import StepRecord

    steps = execute(world, task, result.actions(), spec) if result.solved else []
    store.record_steps(
        StepRecord(
            run_id=run_id,
            step=i,
            action=s.name,
            args=s.args,
            features=dict(spec.context),
            outcome="failure" if failed else "success",
        )
        for i, (s, failed) in enumerate(steps)
    )
    store.end_run(run_id, "failure" if any(f for _, f in steps) else "success")
    return steps


def run_world(
    world: World,
    episodes: int = 200,
    retrain_every: int = 10,
    policies: Sequence[str] = POLICIES,
    model_params: dict | None = None,
    latency_rounds: int = 0,
    traces_dir: Path | None = None,
) -> WorldRun:
    """Play `episodes` episodes of `world` under every arm; retrain the learned arms every `retrain_every`
    episodes with `FailureModel(**model_params)`. Each learned arm's trace store is in memory, or with
    `traces_dir` the file `trace_path(traces_dir, world.name, policy)`, kept after the run; an existing file is
    refused (FileExistsError), never deleted or added to: each arm must start from an empty store. With
    `latency_rounds` > 0, each learned arm's warm latency is measured afterwards (`latency.py`)."""
    from domains.pddl_writer import formula_to_pddl
    from learning.retrain import retrain
    from portfolio.benchsuite.worlds.adapt import shifts
    from portfolio.benchsuite.worlds.exact import CostRecorder, ExactSearch, quality_call
    from portfolio.benchsuite.worlds.latency import warm_latency
    from portfolio.planner import Planner

    start = time.perf_counter()
    out = WorldRun(world.name, world.kind, episodes)
    stores = {p: ":memory:" if traces_dir is None else trace_path(traces_dir, world.name, p) for p in policies}
    existing = [str(path) for path in stores.values() if path != ":memory:" and Path(path).exists()]
    if existing:
        raise FileExistsError(f"{', '.join(existing)}: already exists; a learned arm must start from an empty store")
    if traces_dir is not None:
        traces_dir.mkdir(parents=True, exist_ok=True)
    # The measured arms: the default cascade, default budgets, as `portfolio plan` and `Planner(traces=...)`.
    plain = Planner()
    learners = {
        p: Planner(traces=stores[p], explore=p, cost_weight=LAM, seed=zlib.crc32(f"{world.name}:{p}".encode()))
        for p in policies
    }
    recorders = {p: CostRecorder(learner) for p, learner in learners.items()}
    exact = ExactSearch(world.domain)
    arms = ["cost-blind", *(f"learned-{p}" for p in policies), "oracle"]
    out.events = world.events(episodes)
    for arm in arms:
        out.success[arm], out.expected[arm], out.true_cost[arm], out.searches[arm] = [], [], [], {}
        if out.events:
            out.watched[arm] = []
        if arm.startswith("learned-"):
            out.predicted[arm] = []
        if arm != "oracle":
            out.latency_ms[arm] = []
    for p in policies:
        out.quality[p] = []
    try:
        for index in range(episodes):
            spec = world.episode(index)
            task = world.task(spec)
            results = {"cost-blind": plain.plan(task), "oracle": exact.solve(task, true_costs(world, task, spec))}
            if world.kind == "type" and index == NEW_VEHICLES_AT:
                new = next(v for v in world.bad["new"] if world.vehicles[v] == "van-a")
                out.new_object = {
                    p: new_object_report(world, learner, task, spec, new) for p, learner in learners.items()
                }
            for policy, learner in learners.items():
                store = learner.store
                assert store is not None  # every learner has its in-memory trace store
                run_id = store.start_run(task.fingerprint, formula_to_pddl(task.problem.goal), run_id=f"e{index}")
                result = results[f"learned-{policy}"] = learner.plan(task, features=spec.context, run_id=run_id)
                if result.solved and recorders[policy].costs:
                    costs = recorders[policy].costs
                    optimum = exact.solve(task, costs)
                    out.quality[policy].append(quality_call(index, task, result, optimum, costs, digits=4))
                execute_and_record(world, task, result, spec, store, run_id)
                if (index + 1) % retrain_every == 0 and store.count_steps():
                    retrain(store, holdout_fraction=0.0, **(model_params or {}))
                    learner.reload_model()
                    if (
                        world.kind == "type"
                        and policy not in out.new_object_100
                        and sibling_counts(world, learner)[2] >= SIBLING_STEPS
                    ):
                        out.new_object_100[policy] = new_object_report(world, learner, task, spec, PROBE)
            for arm in arms:
                result = results[arm]
                plan = result.actions() if result.solved else []
                steps = execute(world, task, plan, spec) if result.solved else []
                out.success[arm].append(bool(result.solved) and not any(f for _, f in steps))
                out.expected[arm].append(math.prod(1 - world.p_fail(s, spec) for s in plan) if result.solved else 0.0)
                paid = sum(true_cost(world, task, spec, s) for s in plan)
                out.true_cost[arm].append(round(paid, 4) if result.solved else None)
                by = answered_by(result)
                out.searches[arm][by] = out.searches[arm].get(by, 0) + 1
                if arm in out.latency_ms:
                    out.latency_ms[arm].append(result.elapsed_ms)
                if arm in out.predicted:
                    out.predicted[arm].append(result.success_probability if result.solved else None)
                if arm in out.watched:
                    out.watched[arm].append(
                        (sum(map(world.watched, plan)), sum(failed for s, failed in steps if world.watched(s)))
                    )
        out.shifts = {arm: shifts(out.events, out.watched[arm]) for arm in out.watched}
        final = world.episode(episodes - 1)
        for policy, learner in learners.items():
            out.calibration[policy] = calibration(world, learner, final)
            if latency_rounds > 0:
                out.latency[policy] = asdict(
                    warm_latency(plain, learner, world.task(final), final.context, latency_rounds)
                )
    finally:
        for learner in learners.values():
            learner.close()
        plain.close()
        exact.close()
    out.seconds = round(time.perf_counter() - start, 2)
    return out


def trace_path(folder: Path, world: str, policy: str) -> Path:
    """Where `run_world(traces_dir=folder)` keeps the learned arm `policy`'s trace store of `world`."""
    return folder / f"{world}-{policy}.db"


PROBE = "v-new"  # an object no task holds: what a new van-a would start with, whenever it came


def sibling_counts(world: World, learner) -> tuple[float, float, float, float]:
    """The learner's recorded drives by the van-a vehicles there from the start: recency-weighted steps and
    failures (`learning.counts`, the model's own weights: what the fit sees), then plain steps and failures."""
    from learning.counts import Counts

    counts = Counts(getattr(learner.model, "half_life_steps", None))
    for step in learner.store.iter_steps(action="drive"):
        sibling = world.vehicles.get(step.args[0]) == "van-a" and step.args[0] not in world.bad["new"]
        counts.add("drive", ("sibling" if sibling else "other", ""), step.failed)
    w, wf, n, f = counts.finish().cells.get("drive", {}).get(("sibling", ""), [0.0, 0.0, 0, 0])
    return w, wf, n, f


def new_object_report(world: World, learner, task, spec, new: str) -> dict:
    """`type` worlds: the p_fail the learner gives a new bad-type vehicle's drives (mean over roads), next to what
    its siblings' traces say at that moment: `sibling_steps` (their recorded drives), `sibling_weight` (the
    same, recency-weighted), `sibling_rate` (their observed failure rate). The target reads: with >= 100
    sibling steps, |p_new - sibling_rate| (and |p_new - true|) <= 0.15."""
    siblings = sorted(v for v, t in world.vehicles.items() if t == "van-a" and v not in world.bad["new"])
    true = statistics.mean(world.p_fail(GroundAction("drive", (siblings[0], a, b)), spec) for a, b in world.roads)
    weighted, weighted_failures, n, failures = sibling_counts(world, learner)
    out = {
        "episode": spec.index,
        "true": true,
        "sibling_steps": n,
        "sibling_weight": round(weighted, 2),
        "sibling_rate": failures / n if n else None,
        "sibling_weighted_rate": weighted_failures / weighted if weighted else None,
        "p_new": None,
    }
    if learner.model is not None:
        drives = [GroundAction("drive", (new, a, b)) for a, b in sorted(world.roads)]
        types = task.objects() | {new: "van-a"}
        p_new = float(statistics.mean(learner.model.predict_proba(drives, spec.context, object_types=types)))
        out |= {
            "p_new": p_new,
            "gap_true": abs(p_new - true),
            "gap_siblings": abs(p_new - out["sibling_rate"]) if n else None,
        }
    return out


def calibration(world: World, learner, spec) -> dict:
    """The final model against the truth: every grounded drive in every situation (routes worlds), or every
    grounded action of the last task (tools and agent domains); every grounded drive (delivery); plus consistency over
    groundings with >= 30 recorded steps."""
    model = learner.model
    if model is None:
        return {}
    task = world.task(spec)
    if world.domain in ("tools", "agent"):
        from portfolio.delegates.typed_search import ground

        grounded = ground(task, 10_000)
        steps = list(grounded.actions) if grounded is not None else []
    else:
        steps = [
            GroundAction("drive", (v, a, b)) for v in world.vehicles_at(spec.index) for a, b in sorted(world.roads)
        ]
    pairs = []
    for weather in ("sun", "rain"):
        situation = dict(spec.context, weather=weather)
        probe = dataclasses.replace(spec, context=situation)
        predicted = model.predict_proba(steps, situation, object_types=task.objects())
        pairs += [(float(p), world.p_fail(s, probe)) for s, p in zip(steps, predicted)]
    counts: dict[tuple, list[int]] = {}
    for step in learner.store.iter_steps():
        acc = counts.setdefault((step.action, step.args, json.dumps(step.features, sort_keys=True)), [0, 0])
        acc[0] += 1
        acc[1] += step.failed
    gaps = []
    for (action, args, features), (n, f) in counts.items():
        if n >= CONSISTENCY_STEPS:
            p = float(model.predict_proba([GroundAction(action, args)], json.loads(features))[0])
            gaps.append(abs(p - f / n))
    return {
        "mae": statistics.mean(abs(p - t) for p, t in pairs),
        "pairs": pairs,
        "consistency_max_gap": max(gaps) if gaps else None,
        "groundings_30": len(gaps),
    }


# -- many worlds ------------------------------------------------------------------------------------------------


def _run_one(kind: str, seed: int, *args: Any) -> WorldRun:
    return run_world(make_world(kind, seed), *args)


def run_worlds(
    worlds: Sequence[tuple[str, int]],
    episodes: int = 200,
    retrain_every: int = 10,
    policies: Sequence[str] = POLICIES,
    jobs: int = 1,
    progress: bool = False,
    on_done: Callable[[WorldRun], None] | None = None,
    model_params: dict | None = None,
    latency_rounds: int = 0,
    traces_dir: Path | None = None,
) -> list[WorldRun]:
    """Run every (kind, seed) world (`run_world`'s arguments); results in the order given. `jobs` > 1 runs that
    many worlds at once in spawned processes; `progress` shows a bar over worlds (stderr); `on_done` is called
    as each one finishes."""
    from tqdm import tqdm

    rest = (episodes, retrain_every, tuple(policies), model_params, latency_rounds, traces_dir)
    args = [(kind, seed, *rest) for kind, seed in worlds]
    runs: list[WorldRun | None] = [None] * len(args)
    with tqdm(total=len(args), unit="world", disable=not progress, desc="worlds") as bar:

        def done(i: int, run: WorldRun) -> None:
            runs[i] = run
            bar.update()
            if on_done is not None:
                on_done(run)

        if jobs <= 1:
            for i, a in enumerate(args):
                done(i, _run_one(*a))
        else:
            with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(_run_one, *a): i for i, a in enumerate(args)}
                for future in as_completed(futures):
                    done(futures[future], future.result())
    return [r for r in runs if r is not None]
