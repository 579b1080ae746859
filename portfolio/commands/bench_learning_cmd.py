"""`portfolio bench learning`: the learned-costs benchmark over generated worlds, a thin layer over
`portfolio.benchsuite.worlds` (argument checks, progress, printing)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from portfolio.commands.common import fail_bad_input

HELD_OUT_SEEDS = 200
TUNING_SEEDS = range(20)

EPILOG = """\
World types (--kinds), each a different shape of what fails (everything else fails 1-2%; routes worlds: vehicles
drive along roads between places, 5-9 places, 2-3 vehicles, the situation {"weather": "sun"|"rain"}):
  groundings  a few random grounded drives fail 50-90%, no structure to learn from
  object      one vehicle fails 50% wherever it drives
  pairs       a few roads fail 70% for every vehicle, both ways (an argument pair)
  situation   one vehicle fails 75% in the rain only
  drift       two roads turn bad (80%) at episode 60 and are repaired at episode 130
  type        every vehicle of the subtype van-a fails 50%; before episode 100 three episodes in four offer
              only van-a vehicles; then a new van-a joins (the report says what p_fail it starts with,
              next to its siblings' recorded steps and failure rate; needs --episodes > 100)
  costed      drives cost the road's length (the task's own costs) and a few grounded drives fail 70%
  tools       the bundled tools domain with situation-dependent faults (hour, region)
  detours     delivery (load, drive, unload packages): a one-road shortcut between two districts fails 75%
              for every truck, a detour 2-4 drives longer fails 3% a road; 1-2 trucks, 1-2 packages, 7-12
              places (the shortcut is cheaper under unit costs, dearer under the true costs)
  vehicle-roads  delivery on a ring of 6-9 places plus chords, 2-4 trucks, each failing 70% on its own bad
              roads (a quarter of the roads)
  agent-tools the bundled tools domain (1-3 report jobs): the cheap engine web-basic fails 80%, the dearer
              web-pro works, database queries time out 60% (docs/traces.md's walkthrough)
Changing worlds (routes, the same origin and destination every episode; a cheap route of 2-3 drives, a detour
1-2 drives longer and a longer way round; 1-3 vehicles; one road of the cheap route, drawn from the seed, is
watched; other drives fail 2%; the oracle plans each episode at that episode's truth):
  outage      the road fails 3%, then 80% from a break drawn in episodes [40, 80) for 30-60 episodes, then 3%
  degradation the road's p_fail rises linearly from 2% (from an episode in [30, 70), over 40-90 episodes) to
              0.6-0.8; its break is the episode where the detour becomes the cheaper route under the truth
  flapping    the road alternates between 3% and 80%, the first break in [30, 50), each phase 25-40 episodes
  few-observations  an agent's tools (domain `agent`): 4-6 actions with 1-3 tools each, priced 1, 2, 3; the
              cheapest tool of about half the actions with an alternative fails 30-60%; goals ask for 1-2
              actions, so an action is called 30-160 times in 200 episodes, shared by its tools (no change
              in the truth)
The seed picks each world's size (places, vehicles, packages, jobs) and faults (and when they change).
For the changing kinds the report adds, per arm, how many failures of the broken road the plans took before
leaving it after each break (target <= 3) and how many episodes after each recovery before using it again
(target <= 20), the oracle's beside them. For every type it gives the ECE and Brier score of the learned
calls' predicted plan success (from episode 50; target ECE <= 0.05) beside cost-blind's, and a reliability
diagram (learning-worlds-reliability.png).

How the arms plan: cost-blind (`Planner()`, the task's own costs) and learned-POLICY (`Planner(traces=...,
explore=POLICY)`) plan every type with the default cascade, as `portfolio plan` does (Fast Downward and
pyperplan sharing 1 s, then the goal agenda; warm planners, as a runtime keeps its Planner), so whatever the
default search is, the measured arms get it. The oracle plans exactly: the optimal plan under the true costs
(base + 5 * -log(1 - p_true)), Dijkstra for the routes worlds, Fast Downward A* with LM-cut (seq-opt-lmcut)
for the others; never the measured arms' search. Each learned arm starts from an empty in-memory trace store
of its own, retrained every --retrain-every episodes (cautious, thompson, optimistic: how groundings are
priced; learning.explore). Arms share the episodes (common random numbers); an episode plans, executes in
simulation and stops at the first failure.

Seeds: world seeds 0-39 and 1000-1019 were used while building the failure model (tuning); 100-119, 200-219,
700-719, 800-819, 900-919, 1100-1119 and 1400-1419 were held out for reports, in that order (the docs' numbers
are on 200-219 and 1400-1419). detours, vehicle-roads and agent-tools were added later; of theirs only
vehicle-roads 0-19 were tuned on; the tests use seeds 0-5. Later: tools 3500-3519 tuned the charge for
uncertainty (learning.explore), 3600-3619 and 3700-3719 were held out (docs/benchmarks.md). Evidence that
ages (learning.changes, learning.counts) was tuned on outage, degradation, flapping and few-observations
0-4 and the stationary types 0-2, then 3700-3704 (held out once, then used to choose); 5000-5019 were held out
for a version before the kept one; the kept one was measured on 6000-6019 (changing types) and 6100-6104
(stationary types), drawn afresh. The changing types' tests use seeds 0-5. The default
--first-seed 200 is a held-out set. A world is the same for the same (type, seed).

The report gives, per type, the spread over worlds (median [min, max]), the type's pooled ratio (sums over its
worlds) and how many worlds meet each target on their own (success >= 0.95 of the oracle's; failures <= 0.5 of
cost-blind's where cost-blind fails 10%+ and the oracle halves them). Plan quality, per type and policy over
every learned call: the returned plan's cost under the very costs it was planned with against the optimum
under the same costs (exact search; median and p95, targets 1.05 and 1.2), each call's latency against its 1 s
budget, seconds per world, and which delegate/search answered each arm. --bundled-episodes N adds the same
plan-quality table on the bundled domains' tasks (hidden faults on one grounding in 8).

Speed: every call goes through Fast Downward (15-40 ms warm at the median), plus an exact search per learned
call and per oracle call outside the routes worlds. Measured on 2 shared cores, 200 episodes, --policies mean,
with the anytime default search: 8-28 s a world (median per type 9 s drift to 21 s object; vehicle-roads up
to 28 s); 33 worlds (3 per type) in 569 s with --jobs 1. Each further policy adds most of that again, so 20
worlds of all 11 types with one policy is ~1 h with --jobs 1; --jobs N runs N worlds at once, each in its own
process with planners of its own. --bundled-episodes 30 adds ~70 s.

Output in --out: learning-worlds.md (the report, also printed), learning-worlds.json (summary and every world's
episodes), learning-worlds.png (success curves and reliability plots of p_fail), learning-worlds-reliability.png
(predicted plan success against observed success, per type). A progress bar over worlds goes to stderr.
With --traces DIR the learned arms' trace stores stay in DIR (one SQLite file per world and policy). With
--latency-rounds N the report adds warm latency: each world's last task planned N times by a planner without a
trace store, one that records plans without a model and the learner (the target: learned costs add <= 10% over
recording), interleaved, plus the cost lookup right after a model reload.

examples:
  portfolio bench learning --kinds pairs,detours --seeds 3 --episodes 100 --policies mean --out results/
                                                       # a quick look, ~1 min
  portfolio bench learning --jobs 2 --policies cautious --out results/   # every type, 20 held-out worlds each
  portfolio bench learning --kinds object --first-seed 0 --seeds 5 --policies cautious   # the tuning worlds
  portfolio bench learning --kinds outage,degradation,flapping,few-observations --seeds 2 --episodes 200 \
      --policies mean --out results/                   # changing worlds: leave, return, calibration
  portfolio bench learning --kinds tools --seeds 3 --policies mean --latency-rounds 60 --traces traces/
                                                       # the tools world, warm latency, trace stores kept
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "learning",
        help="learned costs against cost-blind and oracle planning over generated worlds",
        description="Generate worlds whose actions fail with hidden probabilities (several types, several "
        "sizes, from seeds), plan the same episodes cost-blind, with learned costs and with the true costs, "
        "and report per type: success against the oracle, failures against cost-blind, calibration.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--kinds", default=None, metavar="K1,K2", help="comma-separated world types (default: all, see below)"
    )
    parser.add_argument("--seeds", type=int, default=20, help="worlds per type (default 20)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=HELD_OUT_SEEDS,
        help=f"first world seed (default {HELD_OUT_SEEDS}: held out; 0-19 were used for tuning)",
    )
    parser.add_argument(
        "--tools-seeds",
        type=int,
        default=3,
        help="at most this many `tools` worlds (default 3; 13-17 s a world on 2 cores with "
        "--policies mean; agent-tools is not capped)",
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=200,
        help="episodes per world (default 200; the report compares arms over the last 50)",
    )
    parser.add_argument("--retrain-every", type=int, default=10, help="retrain every K episodes (default 10)")
    parser.add_argument(
        "--policies",
        default="cautious,thompson,optimistic",
        help="comma-separated explore policies of the learned arms: cautious, thompson, optimistic (default: all "
        "three; the old names mean and ucb still work)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results"),
        help="folder for learning-worlds.md/.json/.png (created; default ./results)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worlds run at once, each in its own process (default 1)")
    parser.add_argument(
        "--bundled-episodes",
        type=int,
        default=0,
        metavar="N",
        help="also measure plan quality with learned costs on the bundled tasks (blocksworld, "
        "gripper, logistics, tools at two sizes each): N problems each (the generator's seeds 100 and up; "
        "0-29 were tuned on), retrained every 5 "
        "(default 0: off; 30 takes ~70 s)",
    )
    parser.add_argument(
        "--latency-rounds",
        type=int,
        default=0,
        metavar="N",
        help="after each world, time its last task N times warm with no trace store, with a store that records "
        "plans but has no model, and with learned costs, interleaved: the report's warm latency table "
        "(default 0: off; 60 is 180 warm calls a world and policy, ~10 s where a call takes 50 ms)",
    )
    parser.add_argument(
        "--traces",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each learned arm's trace store as DIR/WORLD-POLICY.db (e.g. tools-200-mean.db), to inspect "
        "with `portfolio traces` or `portfolio costs`; a store that already exists is refused, never "
        "deleted (default: in memory, gone after the run)",
    )
    parser.add_argument(
        "--model-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a FailureModel hyperparameter for the learned arms' retrains, e.g. half_life_steps=500 or "
        "prior_strength=2 (repeatable; NAME=none for None; default: the library's defaults)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_learning)


def run_learning(args: argparse.Namespace) -> int:
    from learning.explore import EXPLORE_POLICIES, renamed
    from portfolio.benchsuite.worlds.family import KINDS
    from portfolio.benchsuite.worlds.report import WINDOW, write_results
    from portfolio.benchsuite.worlds.runner import run_worlds

    kinds = [k for k in (args.kinds or ",".join(KINDS)).split(",") if k]
    policies = [renamed(p) for p in args.policies.split(",") if p]  # old names mapped, with a warning
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        return fail_bad_input(
            f"--kinds: unknown world type {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"expected some of {', '.join(KINDS)}"
        )
    bad = [p for p in policies if p not in EXPLORE_POLICIES]
    if bad or not policies:
        return fail_bad_input(
            f"--policies: unknown explore policy {', '.join(map(repr, bad)) or '(none given)'}; "
            f"expected some of {', '.join(EXPLORE_POLICIES)}"
        )
    for name, value in (
        ("--seeds", args.seeds),
        ("--tools-seeds", args.tools_seeds),
        ("--episodes", args.episodes),
        ("--retrain-every", args.retrain_every),
        ("--jobs", args.jobs),
    ):
        if value < 1:
            return fail_bad_input(f"{name} must be >= 1, got {value}")
    if args.bundled_episodes < 0:
        return fail_bad_input(f"--bundled-episodes must be >= 0, got {args.bundled_episodes}")
    if args.first_seed < 0:
        return fail_bad_input(f"--first-seed must be >= 0, got {args.first_seed}")
    if args.latency_rounds < 0:
        return fail_bad_input(f"--latency-rounds must be >= 0, got {args.latency_rounds}")
    model_params = _model_params(args.model_param)
    if isinstance(model_params, str):
        return fail_bad_input(model_params)
    if args.first_seed < len(TUNING_SEEDS):
        print(
            f"note: seeds {TUNING_SEEDS.start}-{TUNING_SEEDS.stop - 1} were used to tune the failure model; "
            f"--first-seed {HELD_OUT_SEEDS} reports on held-out worlds",
            file=sys.stderr,
        )
    worlds = [
        (kind, seed)
        for kind in kinds
        for seed in range(
            args.first_seed, args.first_seed + (min(args.seeds, args.tools_seeds) if kind == "tools" else args.seeds)
        )
    ]
    if args.traces is not None:
        from portfolio.benchsuite.worlds.runner import trace_path

        taken = [
            str(path)
            for kind, seed in worlds
            for policy in policies
            if (path := trace_path(args.traces, f"{kind}-{seed}", policy)).exists()
        ]
        if taken:
            return fail_bad_input(
                f"--traces: {', '.join(taken[:3])}{' ...' if len(taken) > 3 else ''} already exist(s); each learned "
                "arm must start from an empty store (give another folder, or move them away)"
            )
    start = time.perf_counter()

    def done(run) -> None:
        from tqdm import tqdm

        tqdm.write(
            f"{run.world}: {run.seconds:.1f} s, last-{WINDOW} success "
            + ", ".join(f"{a} {statistics.mean(s[-WINDOW:]):.2f}" for a, s in run.success.items()),
            file=sys.stderr,
        )

    runs = run_worlds(
        worlds, args.episodes, args.retrain_every, policies, jobs=args.jobs, progress=not args.no_progress,
        on_done=done, model_params=model_params, latency_rounds=args.latency_rounds, traces_dir=args.traces,
    )  # fmt: skip
    runs_by_kind: dict = {}
    for run in runs:
        runs_by_kind.setdefault(run.kind, []).append(run)
    bundled = None
    if args.bundled_episodes:
        from portfolio.benchsuite.worlds.bundled import bundled_quality

        bundled = bundled_quality(episodes=args.bundled_episodes)
    paths = write_results(runs_by_kind, policies, args.out, bundled=bundled)
    print(paths["report"].read_text(), end="")
    print(f"\n{len(runs)} worlds in {time.perf_counter() - start:.0f} s")
    for kind, path in paths.items():
        print(f"{kind:<8} {path}")
    return 0


def _model_params(items: list[str]) -> dict[str, int | float | None] | str:
    """--model-param NAME=VALUE items as FailureModel keyword arguments, or the error message."""
    from learning.model import FailureModel

    known = sorted(FailureModel().get_params())
    params: dict[str, int | float | None] = {}
    for item in items:
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in known:
            return (
                f"--model-param: unknown FailureModel parameter {name!r} in {item!r}; "
                f"expected one of {', '.join(known)}"
            )
        try:
            text = value.strip()
            params[name] = None if text.lower() == "none" else int(text) if text.lstrip("-").isdigit() else float(text)
        except ValueError:
            return f"--model-param expects NAME=NUMBER (or NAME=none), got {item!r}"
    return params
