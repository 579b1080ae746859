"""`portfolio costs`: the learned cost of every grounded action of a task, from the latest model."""

from __future__ import annotations

import argparse
import json

from portfolio.commands.common import add_traces_argument, fail_bad_input, store_error_types, weight_type
from portfolio.commands.situation import FeaturesError, add_features_arguments, parse_features

EPILOG = """\
example:
  portfolio costs domain.pddl problem.pddl --traces traces.db --json
  portfolio costs domain.pddl problem.pddl --traces traces.db --features hour=peak region=eu

cost = base cost + lambda * -log(1 - p_fail): summed over a plan, the risk term is -log of the probability
that every step succeeds, so the cheapest plan trades cost against the chance of failing. p_fail is the
posterior mean in the situation --features describes (what `plan --explore mean` plans with).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "costs",
        help="list grounded actions with learned p_fail and cost",
        description="List every grounded action of a task (as Fast Downward grounds it) with its base cost, the "
        "failure probability predicted by the latest model in the trace store, and the cost planning uses.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("domain", help="PDDL domain file")
    parser.add_argument("problem", help="PDDL problem file")
    add_traces_argument(parser)
    add_features_arguments(parser)
    parser.add_argument(
        "--weight",
        type=weight_type,
        default=5.0,
        metavar="LAMBDA",
        help="lambda, the price of risk in cost units per nat (default: 5)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from domains.errors import TaskInputError
    from domains.load import load_task
    from learning.costs import cost_rows
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.planner import Planner

    try:
        features = parse_features(args.features, args.features_json)
        task = load_task(args.domain, args.problem)
        planner = Planner([FastDownward()], traces=args.traces, cost_weight=args.weight, warm=False)
    except (TaskInputError, FeaturesError) as error:
        return fail_bad_input(str(error))
    except store_error_types() as error:
        return fail_bad_input(str(error))
    with planner:
        if planner.model is None:
            return fail_bad_input(f"{args.traces} holds no trained model yet; run `portfolio retrain` first")
        costs = planner.learned_costs(task, features=features or None)
    rows = cost_rows(costs)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(row["action"]) for row in rows), default=6)
    print(f"{'action':<{width}}  {'base':>7}  {'p_fail':>7}  {'cost':>8}")
    for row in rows:
        print(f"{row['action']:<{width}}  {row['base_cost']:>7g}  {row['p_fail']:>7.3f}  {row['cost']:>8.3f}")
    return 0
