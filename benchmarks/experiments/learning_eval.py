"""Does planning with learned costs approach an oracle that knows the true failure probabilities?

    python -m benchmarks.experiments.learning_eval --episodes 200      # table on stdout, results in benchmarks/results/
    pytest benchmarks/bench_learning.py --benchmark-only   # the same run under pytest-benchmark (`make bench`)

The world: report jobs of the bundled `tools` domain (sizes 2-4, ten generator seeds, so episodes differ), in a
situation drawn per episode, `{"hour": "peak" | "off-peak", "region": "eu" | "us"}`. Some grounded actions fail
with hidden probabilities that depend on the situation (`WORLD_RULES`: the cheap web engine fails 80% of the
time at peak hours and 4% off-peak; connecting to db-internal fails 75% from the EU; querying db-news fails 30%
always; the small writer 4%; everything else 1%).

An episode: draw the situation and task, plan, execute the plan step by step in simulation (each step fails with
its true probability), stop at the first failure. There is no replanning: the benchmark measures plan choice,
not recovery. Three arms plan the same episodes:

    cost-blind  `Planner()` without traces: the task's own costs only;
    learned     `Planner(traces=...)`, starting with an empty store; every executed step is recorded (with the
                situation as its features) and the model is retrained every K episodes (`retrain`, then
                `reload_model`);
    oracle      the cascade given the true costs, `base + lam * -log(1 - p_true)` per grounded action, with the
                same lam as the learned arm's `cost_weight`.

Step outcomes use common random numbers: the k-th execution of a grounded action in episode e succeeds or fails
alike for every arm, so arms that choose the same steps see the same luck. Besides the realised success rate
the report gives each arm's expected success (the true probability that its chosen plan succeeds, averaged over
the window): noise-free, it separates plan quality from luck in windows of 25 episodes.

This module runs the episodes (the arms, `evaluate`) and the command line; the simulated world's episodes (the
situations and tasks drawn, the common random numbers, the execution of a plan) are `learning_episodes.py`; the
latency measurement is `learning_latency.py`; the windows, verdicts, Markdown report, plot and result files are
`learning_report.py`; the names and records they share (`Outcome`, `Latency`, `Evaluation`, the arms, the targets)
are `learning_data.py`. The names of the last three are re-exported here.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from benchmarks.experiments.learning_data import (  # re-exported (`__all__`): tests and notes use these names
    ARMS,
    DOMAIN,
    LATENCY_TASK,
    RESULTS_DIR,
    TARGET_FAILURES_VS_BLIND,
    TARGET_LATENCY_OVERHEAD,
    TARGET_SUCCESS_VS_ORACLE,
    Evaluation,
    Latency,
    Outcome,
)
from benchmarks.experiments.learning_episodes import EpisodeSpec, Execution, execute, make_episodes
from benchmarks.experiments.learning_latency import measure_latency
from benchmarks.experiments.learning_report import (  # re-exported: tests and bench_learning.py use these
    Verdict,
    WindowRow,
    plot,
    report,
    verdicts,
    windows,
    write_results,
)
from domains.model import Task, action_cost
from portfolio.benchsuite.worlds.tools import (  # re-exported: tests and notes use these names from here
    DEFAULT_P_FAIL,
    WORLD_RULES,
    FailureRule,
    plan_success_probability,
    true_p_fail,
)

__all__ = [  # what this module offers, its own and re-exported (ruff keeps re-exports listed here)
    "ARMS",
    "DEFAULT_P_FAIL",
    "DOMAIN",
    "LATENCY_TASK",
    "RESULTS_DIR",
    "TARGET_FAILURES_VS_BLIND",
    "TARGET_LATENCY_OVERHEAD",
    "TARGET_SUCCESS_VS_ORACLE",
    "WORLD_RULES",
    "Evaluation",
    "FailureRule",
    "Latency",
    "Outcome",
    "Verdict",
    "WindowRow",
    "evaluate",
    "fresh_traces_path",
    "main",
    "measure_latency",
    "oracle_costs",
    "plan_oracle",
    "plan_success_probability",
    "plot",
    "report",
    "true_p_fail",
    "verdicts",
    "windows",
    "write_results",
]

log = logging.getLogger(__name__)

# -- arms -------------------------------------------------------------------------------------------------------


def _fast_downward(planner):
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.engine.tiers import Tier

    for stage in planner.cascade.delegates:
        for delegate in stage.delegates if isinstance(stage, Tier) else [stage]:
            if isinstance(delegate, FastDownward):
                return delegate
    raise RuntimeError("the oracle arm needs Fast Downward in the cascade (it lists the grounded actions)")


def oracle_costs(planner, task: Task, context: Mapping[str, str], lam: float) -> dict[str, float]:
    """True costs, `base + lam * -log(1 - p_true)`, for every grounded action Fast Downward's translator keeps
    (the same set learned costs are computed for)."""
    from domains.ground_text import parse_ground_action
    from learning.costs import risk_cost
    from portfolio.engine.results import PlanRequest

    grounded = _fast_downward(planner).grounded_actions(PlanRequest(task=task), time.monotonic() + 60.0)
    costs = {}
    for text in grounded:
        step = parse_ground_action(text)
        costs[str(step)] = action_cost(task, step) + risk_cost(true_p_fail(step, context), lam)
    return costs


def plan_oracle(planner, task: Task, context: Mapping[str, str], lam: float):
    from portfolio.engine.results import PlanRequest

    return planner.cascade.solve(PlanRequest(task=task, costs=oracle_costs(planner, task, context, lam)))


# -- the evaluation ---------------------------------------------------------------------------------------------


def _outcome(arm: str, spec: EpisodeSpec, task: Task, result, seed: int, plan_ms: float) -> tuple[Outcome, Execution]:
    plan = result.actions() if result.solved else []
    run = execute(task, plan, spec, seed) if result.solved else Execution([], False)
    outcome = Outcome(
        arm=arm, episode=spec.index, size=spec.size, task_seed=spec.task_seed, context=dict(spec.context),
        solved=result.solved, plan=[str(s) for s in plan], base_cost=sum(action_cost(task, s) for s in plan),
        expected_success=plan_success_probability(plan, spec.context) if result.solved else 0.0,
        success=run.success, steps_executed=len(run.steps),
        failed_step=next((str(s) for s, failed in run.steps if failed), None), plan_ms=round(plan_ms, 3),
        predicted_success=result.success_probability,
    )  # fmt: skip
    return outcome, run


def fresh_traces_path(folder: Path) -> Path:
    """A trace-store path in `folder` that no earlier run used (named by the time it was asked for)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = folder / f"learning-traces-{stamp}.db", 1
    while path.exists():
        path, n = folder / f"learning-traces-{stamp}-{n}.db", n + 1
    return path


def evaluate(
    episodes: int = 200,
    retrain_every: int = 10,
    window: int = 25,
    seed: int = 0,
    lam: float = 5.0,
    traces: str | Path | None = None,
    latency_rounds: int = 60,
    model_params: Mapping[str, float | None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """Play `episodes` episodes with all three arms; the learned arm records into a new store at `traces`
    (default: benchmarks/results/learning-traces-<time>.db; an existing file is refused, never deleted: a
    database is only ever opened through SQLite) and retrains every
    `retrain_every` episodes, with `FailureModel(**model_params)` (default: the library's defaults). With
    `latency_rounds` > 0, warm latency is measured afterwards."""
    from domains.pddl_writer import formula_to_pddl
    from learning.retrain import retrain
    from portfolio.planner import Planner
    from traces.records import StepRecord

    traces_path = Path(traces) if traces is not None else fresh_traces_path(RESULTS_DIR)
    if traces_path.exists():
        raise FileExistsError(
            f"{traces_path}: already exists; the learned arm must start from an empty store "
            "(give a new --traces file, or leave it out for a fresh one)"
        )
    traces_path.parent.mkdir(parents=True, exist_ok=True)
    specs = make_episodes(episodes, seed)
    outcomes: list[Outcome] = []
    retrain_seconds: list[float] = []
    start = time.perf_counter()
    with Planner(cost_weight=lam) as plain, Planner(traces=traces_path, cost_weight=lam) as learner:
        store = learner.store
        for spec in specs:
            task = spec.task()
            t0 = time.perf_counter()
            blind = plain.plan(task)
            t1 = time.perf_counter()
            outcomes.append(_outcome("cost-blind", spec, task, blind, seed, (t1 - t0) * 1000)[0])

            run_id = store.start_run(
                task.fingerprint, formula_to_pddl(task.problem.goal), run_id=f"episode-{spec.index:04d}"
            )
            t0 = time.perf_counter()
            learned = learner.plan(task, features=spec.context, run_id=run_id)
            t1 = time.perf_counter()
            outcome, run = _outcome("learned", spec, task, learned, seed, (t1 - t0) * 1000)
            outcomes.append(outcome)
            store.record_steps(
                StepRecord(run_id=run_id, step=i, action=step.name, args=step.args,
                           outcome="failure" if failed else "success", features=spec.context)
                for i, (step, failed) in enumerate(run.steps)
            )  # fmt: skip
            store.end_run(run_id, "success" if run.success else "failure")

            t0 = time.perf_counter()
            oracle = plan_oracle(plain, task, spec.context, lam)
            t1 = time.perf_counter()
            outcomes.append(_outcome("oracle", spec, task, oracle, seed, (t1 - t0) * 1000)[0])

            if (spec.index + 1) % retrain_every == 0 and store.count_steps() > 0:
                t0 = time.perf_counter()
                retrain(store, **dict(model_params or {}))
                learner.reload_model()
                retrain_seconds.append(round(time.perf_counter() - t0, 3))
            if progress is not None and (spec.index + 1) % window == 0:
                done = [o for o in outcomes if o.episode > spec.index - window]
                rates = {arm: sum(o.success for o in done if o.arm == arm) / window for arm in ARMS}
                progress(
                    f"episodes {spec.index + 2 - window}-{spec.index + 1}: "
                    + ", ".join(f"{arm} {rate:.2f}" for arm, rate in rates.items())
                )
        model_versions = store.latest_model().version if store.latest_model() else 0
        latency = measure_latency(plain, learner, specs, latency_rounds) if latency_rounds > 0 else None
    return Evaluation(
        episodes,
        retrain_every,
        window,
        seed,
        lam,
        outcomes,
        model_versions,
        round(time.perf_counter() - start, 1),
        latency,
        retrain_seconds,
        dict(model_params or {}),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.experiments.learning_eval",
        description="Simulated evaluation of learned action costs: episodes of the bundled tools domain in which "
        "some grounded actions fail with hidden, situation-dependent probabilities. Three arms plan the same "
        "episodes (cost-blind, learned from the arm's own traces, oracle with the true costs); each plan is "
        "executed once in simulation without replanning. Prints a table of success rates per window and the "
        "target verdicts; writes learning.md, learning.png and learning.json to --out.",
        epilog="Example: python -m benchmarks.experiments.learning_eval --episodes 200 --retrain-every 10",
    )
    parser.add_argument("--episodes", type=int, default=200, help="episodes per arm (default 200)")
    parser.add_argument(
        "--retrain-every",
        type=int,
        default=10,
        metavar="K",
        help="retrain the learned arm's model every K episodes (default 10)",
    )
    parser.add_argument("--window", type=int, default=25, help="episodes per reported window (default 25)")
    parser.add_argument("--seed", type=int, default=0, help="seed for tasks, situations and step outcomes")
    parser.add_argument(
        "--lam",
        type=float,
        default=5.0,
        help="lambda of cost = base + lambda * -log(1 - p_fail), for learned and oracle (default 5)",
    )
    parser.add_argument(
        "--latency-rounds",
        type=int,
        default=60,
        help="warm plan calls per configuration for the latency comparison (0: skip)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output directory (default benchmarks/results)")
    parser.add_argument(
        "--traces",
        type=Path,
        default=None,
        help="trace store for the learned arm (a new file; an existing one is refused; default "
        "OUT/learning-traces-<time>.db)",
    )
    parser.add_argument(
        "--model-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a FailureModel hyperparameter for the learned arm's retrains, e.g. transfer=0 or "
        "prior_beta=1.9 (repeatable; default: the library's defaults)",
    )
    args = parser.parse_args(argv)
    model_params = {}
    for item in args.model_param:
        name, _, value = item.partition("=")
        try:
            model_params[name.strip()] = None if value.strip().lower() == "none" else float(value)
        except ValueError:
            parser.error(f"--model-param expects NAME=NUMBER (or NAME=none), got {item!r}")
    from learning.model import FailureModel

    unknown = sorted(set(model_params) - set(FailureModel().get_params()))
    if unknown:
        parser.error(
            f"--model-param: unknown FailureModel parameter(s) {', '.join(unknown)}; expected some of "
            + ", ".join(sorted(FailureModel().get_params()))
        )
    for name in ("episodes", "retrain_every", "window"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        evaluation = evaluate(
            args.episodes, args.retrain_every, args.window, args.seed, args.lam,
            traces=args.traces or fresh_traces_path(args.out), latency_rounds=args.latency_rounds,
            model_params=model_params, progress=lambda line: print(line, file=sys.stderr, flush=True),
        )  # fmt: skip
    except FileExistsError as error:
        print(f"learning_eval: {error}", file=sys.stderr)
        return 2
    paths = write_results(evaluation, args.out)
    print(report(evaluation), end="")
    print(f"wrote {paths['md']}, {paths['png']}, {paths['json']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
