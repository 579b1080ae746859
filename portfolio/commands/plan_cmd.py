"""`portfolio plan`: plan one task and print the plan (or the PlanResult as JSON)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from portfolio.commands.common import (
    add_cost_arguments,
    add_objective_arguments,
    add_tenant_arguments,
    add_traces_argument,
    fail_bad_input,
    learning_tenant,
    seconds_type,
    time_params,
)
from portfolio.commands.situation import FeaturesError, add_features_arguments, parse_features
from portfolio.delegates.registry import CATALOG, default_names, help_text

DESCRIPTION = """\
Plan one task. The classical tier (Fast Downward, then pyperplan) shares --budget seconds; if it runs out of
time or fails, the decomposer tier (the LLM with --llm-url, then the goal agenda) gets --decomposer-budget
seconds. Within a tier each delegate gets the time left x its share / the shares still to run (--shares), so
a slow first delegate cannot starve the next. A share is the deadline for a delegate's first answer, not for
its work: Fast Downward's translation and searches go on in the background past its share, beside pyperplan
and the decomposer tier, until the last deadline (--no-carry-over: killed at the end of its share); the first
valid plan wins. `--delegates fast-downward,pyperplan` stops after the classical tier. Only a proof of
unsolvability stops the cascade early. Every plan printed has been checked by the validator.

Plain output is a plan file: one action per line in PDDL form, then comment lines (;) with the cost, the
delegate that solved it, and every attempt with its status and time. Statuses (the JSON "status" field, for
the call and for each attempt): solved; unsolvable (proved by a complete method); incomplete (an incomplete
search ran out of states: no verdict); unsupported (the delegate declined the task); memout; timeout; error.
"""

EPILOG = """\
examples:
  portfolio plan tests/data/ipc/blocks/domain.pddl tests/data/ipc/blocks/probBLOCKS-4-0.pddl
  portfolio plan domain.pddl problem.pddl --budget 2 --delegates pyperplan --json
  portfolio plan domain.pddl problem.pddl --delegates fast-downward,pyperplan      # classical tier only
  portfolio plan domain.pddl problem.pddl --llm-url http://localhost:8000/v1 --llm-model qwen
  portfolio plan --task domains/examples/blocks-task.json
  portfolio plan domain.pddl problem.pddl --traces traces.db     # learned costs steer the plan, and
                                  # after `portfolio retrain` the searches that solved this domain first race
  portfolio plan domain.pddl problem.pddl --traces traces.db --features hour=peak --explore cautious
  portfolio plan domain.pddl problem.pddl --traces traces.db --explain   # the plan base costs give, and
                                  # the evidence against each of its steps the learned plan avoided
  portfolio plan domain.pddl problem.pddl --no-cache              # translate even if translated before

exit codes: 0 solved; 1 no plan (status unsolvable, incomplete, unsupported, memout, timeout or error: the
output says which); 2 bad input (nothing is left running; with --json, {"error", "kind"} on stdout)
"""


VERDICTS = {
    "unsolvable": "the task is unsolvable (proved)",
    "timeout": "every delegate ran out of time",
    "memout": "delegates ran out of memory",
    "incomplete": "the searches that ran are incomplete and found nothing (no proof either way)",
    "unsupported": "no delegate supports this task",
    "error": "every delegate failed",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan a PDDL or JSON task",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("domain", nargs="?", help="PDDL domain file")
    parser.add_argument("problem", nargs="?", help="PDDL problem file")
    parser.add_argument("--task", metavar="FILE", help="a JSON task file instead of DOMAIN PROBLEM")
    parser.add_argument(
        "--budget",
        type=seconds_type,
        default=1.0,
        metavar="S",
        help="seconds for the classical tier, all delegates together (default: 1.0)",
    )
    parser.add_argument(
        "--delegates",
        default=None,
        metavar="LIST",
        help=f"comma-separated delegates in cascade order (default: {','.join(default_names())}; "
        f"with --llm-url: {','.join(default_names(with_llm=True))}). {help_text()}",
    )
    parser.add_argument(
        "--shares",
        default=None,
        metavar="NAME=W,...",
        help="weights that split each tier's budget (default: "
        + ",".join(f"{n}={s.share:g}" for n, s in CATALOG.items())
        + ")",
    )
    parser.add_argument(
        "--fd-alias",
        default="lama-first",
        metavar="NAME",
        help="the Fast Downward search that leads on unit-cost tasks (default lama-first). It is not always the "
        "one that answers: with --fd-workers above 1 it races diverse greedy searches (eager-ff-cg, lazy-cea, "
        "lazy-add; after `portfolio retrain`, those that solved the domain first) and the first plan wins; small "
        "replans are searched in this process first (delegate fd-inprocess). The search that answered is the "
        "attempt's details.search (--json). seq-opt-lmcut and seq-opt-bjolp run alone (optimal plans, no "
        "in-process search); tasks with costs: see --quality",
    )
    parser.add_argument(
        "--fd-search", default=None, metavar="STRING", help="a raw Fast Downward --search string, overriding --fd-alias"
    )
    parser.add_argument(
        "--fd-workers",
        type=int,
        default=None,
        metavar="N",
        help="searches Fast Downward runs at once on a unit-cost task after one translation: "
        "--fd-alias and N-1 diverse greedy searches, first plan wins (default: the cores this "
        "process may use; 1: --fd-alias alone; tasks with costs: see --quality)",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="where Fast Downward translations are kept between runs, so a task planned before "
        "skips translation (default: $XDG_CACHE_HOME/portfolio-planner, else "
        "~/.cache/portfolio-planner; at most 256 MiB, least recently used go first)",
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the translation cache")
    parser.add_argument("--json", action="store_true", help="print the PlanResult as JSON")
    parser.add_argument(
        "--explain",
        action="store_true",
        help="with learned costs (--traces), also plan under the task's own costs and show that plan beside the "
        "learned one, with the evidence (steps, failures, last seen, p_fail and its 90%% interval) against each of "
        'its steps the learned plan avoided (--json: an "explain" object beside the PlanResult\'s fields); the '
        "base-cost plan is not recorded. Without learned costs it says there is nothing learned to explain",
    )
    add_traces_argument(parser, required=False)
    add_tenant_arguments(parser, "price with")
    add_features_arguments(parser)
    from learning.explore import EXPLORE_POLICIES, renamed

    parser.add_argument(
        "--explore",
        type=renamed,  # the old names (mean, ucb) map to their policies, with a warning
        choices=EXPLORE_POLICIES,
        default=None,
        help="how learned costs explore: cautious (default) plans with each action's estimated "
        "failure probability plus one standard deviation of it for actions already tried, so an action "
        "known from few steps costs more (untried actions start at an optimistic prior), and plans once more "
        "under a sample when a step of its plan fails more often than not; thompson samples "
        "it per call, so rarely tried alternatives get tried; optimistic prices every action as reliable "
        "as it plausibly is (its 10%% quantile). The old names mean and ucb still work",
    )
    add_cost_arguments(parser)
    add_objective_arguments(parser)
    parser.add_argument(
        "--llm-url",
        default=None,
        metavar="URL",
        help="OpenAI-compatible base URL ending in /v1 (key from PORTFOLIO_LLM_API_KEY)",
    )
    parser.add_argument("--llm-model", default=None, metavar="NAME", help="model name for --llm-url")
    parser.add_argument(
        "--decomposer-budget",
        type=seconds_type,
        default=30.0,
        metavar="S",
        help="seconds for the decomposer tier (default: 30)",
    )
    parser.add_argument(
        "--keep-all-steps",
        dest="eliminate_steps",
        action="store_false",
        help="return the delegate's plan as found (default: steps that no goal needs are removed "
        "after validation, by greedy action elimination; the JSON's eliminated_steps counts them)",
    )
    parser.add_argument(
        "--no-carry-over",
        dest="carry_over",
        action="store_false",
        help="kill Fast Downward's translation and searches when its share of the classical tier "
        "ends (default: they go on in the background beside the later delegates until the "
        "cascade's last deadline, and the first valid plan from either wins)",
    )
    parser.set_defaults(func=run)


def delegate_names(args: argparse.Namespace) -> list[str]:
    if args.delegates:
        return [name.strip() for name in args.delegates.split(",") if name.strip()]
    return list(default_names(with_llm=bool(args.llm_url)))


def fd_workers(args: argparse.Namespace) -> int | None:
    if args.fd_workers is not None and args.fd_workers < 1:
        raise ValueError(f"--fd-workers: expected a positive number of searches, got {args.fd_workers}")
    return args.fd_workers


def translation_cache(args: argparse.Namespace):
    """The on-disk translation cache `--cache-dir`/`--no-cache` ask for
    (`portfolio.delegates.fast_downward.sas_cache`), or None."""
    if args.no_cache:
        return None
    from pathlib import Path

    from portfolio.delegates.fast_downward.sas_cache import SasCache

    if args.cache_dir and Path(args.cache_dir).exists() and not Path(args.cache_dir).is_dir():
        raise ValueError(f"--cache-dir {args.cache_dir}: expected a directory, found a file")
    return SasCache(args.cache_dir)


def parse_shares(text: str | None) -> dict[str, float]:
    """`"fast-downward=3,pyperplan=1"` -> {"fast-downward": 3.0, "pyperplan": 1.0}; ValueError when malformed."""
    shares: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, weight = item.partition("=")
        try:
            value = float(weight) if sep else float("nan")
        except ValueError:
            value = float("nan")
        if not (math.isfinite(value) and value > 0):  # inf passed `> 0` and made Fast Downward's slice NaN
            raise ValueError(f"--shares: expected NAME=WEIGHT with a finite positive weight, got {item.strip()!r}")
        shares[name.strip()] = value
    return shares


def run(args: argparse.Namespace) -> int:
    from domains.errors import TaskInputError
    from portfolio.commands.common import store_error_types
    from portfolio.delegates.registry import build_stages
    from portfolio.planner import Planner

    if bool(args.task) == bool(args.domain):
        return bad_input(args, "give either DOMAIN PROBLEM or --task FILE")
    if args.domain and not args.problem:
        return bad_input(args, "a PROBLEM file is needed after the DOMAIN file")
    try:
        features = parse_features(args.features, args.features_json)
    except FeaturesError as error:
        return bad_input(args, str(error), type(error).__name__)
    traces = args.traces if args.traces_given else None
    # options that act only through learned costs (a trace store's model), those given
    learned_only = {
        "--weight": args.weight is not None,
        "--explore": args.explore is not None,
        "--objective": args.objective is not None,
        "--features": bool(features),
        "--tenant": args.tenant != "default",
        "--pooled": args.pooled,
    }
    idle = [flag for flag, given in learned_only.items() if given]
    if traces is None and idle:  # accepted without a word, they changed nothing: the user meant learned costs
        return bad_input(
            args,
            f"{', '.join(idle)}: only learned costs use {'these' if len(idle) > 1 else 'this'}; give --traces PATH "
            "(or set PORTFOLIO_TRACES) for the trace store whose model sets them",
        )
    try:
        # Names, options and shares are checked before any process starts; a failure half-way closes what
        # was built, and the Planner closes its stages if the trace store cannot be opened.
        stages = build_stages(
            delegate_names(args),
            budget_s=args.budget,
            fd_alias=args.fd_alias,
            fd_search=args.fd_search,
            llm_url=args.llm_url,
            llm_model=args.llm_model,
            decomposer_budget_s=args.decomposer_budget,
            shares=parse_shares(args.shares),
            translation_cache=translation_cache(args),
            fd_workers=fd_workers(args),
        )
    except ValueError as error:
        return bad_input(args, str(error), type(error).__name__)
    try:
        # The planner starts its worker processes now, so they warm up while the task is read.
        planner = Planner(
            stages,
            traces=traces,
            explore=args.explore,
            carry_over=args.carry_over,
            eliminate_steps=args.eliminate_steps,
            quality=args.quality,
            objective=args.objective,
            time=time_params(args),
            tenant=learning_tenant(args),
            **({} if args.weight is None else {"cost_weight": args.weight}),
        )
    except store_error_types() as error:
        return bad_input(args, str(error), type(error).__name__)
    with planner:
        try:
            task = load(args)
        except TaskInputError as error:
            return bad_input(args, str(error), type(error).__name__)
        result = planner.plan(task, features=features or None)
        explanation = planner.explain(task, result, features=features or None) if args.explain else None
    if explanation is None:
        print_result(result, as_json=args.json)
    elif args.json:
        print(json.dumps({**result.model_dump(mode="json"), "explain": explanation.model_dump(mode="json")}, indent=2))
    else:
        from portfolio.cost_explain import explanation_lines

        print_result(result, as_json=False)
        sys.stdout.write("".join(f"; {line}\n" for line in explanation_lines(explanation)))
    return 0 if result.solved else 1


def bad_input(args: argparse.Namespace, message: str, kind: str = "BadInput") -> int:
    """Exit 2 with the message on stderr; with --json also `{"error", "kind"}` on stdout (the service's error
    body), so a caller that parses stdout gets an answer instead of nothing."""
    if args.json:
        print(json.dumps({"error": message, "kind": kind}, indent=2))
    return fail_bad_input(message)


def load(args: argparse.Namespace):
    from domains.load import load_json_task, load_task

    if args.task:
        return load_json_task(args.task)
    return load_task(args.domain, args.problem)


def print_result(result, as_json: bool) -> None:
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    out = sys.stdout
    if result.solved:
        for step in result.plan:
            out.write(step + "\n")
        learned = "" if result.learned_cost is None else f" (base), {result.learned_cost:.3f} (learned)"
        if result.learned_cost is not None and (result.cost_model or "").endswith(":time"):
            learned = f" (base), {result.learned_cost * 1000:.0f} ms expected (learned, objective time)"
        out.write(f"; cost = {result.cost:g}{learned}\n")
        out.write(f"; delegate = {result.delegate}\n")
        if result.eliminated_steps:
            out.write(f"; steps no goal needed, removed = {result.eliminated_steps}\n")
        if result.success_probability is not None:
            out.write(f"; success probability = {result.success_probability:.3f}\n")
    else:
        verdict = "no plan: " + VERDICTS[result.status.value]
        out.write(f"; {verdict}\n")
        for line in result.explanation:
            out.write(f"; {line}\n")
    for attempt in result.attempts:
        reason = f" ({attempt.reason})" if attempt.reason else ""
        out.write(f"; attempt {attempt.delegate}: {attempt.status.value} in {attempt.elapsed_ms:.1f} ms{reason}\n")
    out.write(f"; total {result.elapsed_ms:.1f} ms\n")
    out.flush()
