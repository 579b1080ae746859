"""`portfolio costs`: the learned cost of every grounded action of a task, from the latest model."""

from __future__ import annotations

import argparse
import json

from portfolio.commands.common import (
    add_objective_arguments,
    add_tenant_arguments,
    add_traces_argument,
    fail_bad_input,
    learning_tenant,
    store_error_types,
    time_params,
    weight_type,
)
from portfolio.commands.situation import FeaturesError, add_features_arguments, parse_features
from traces.targets import redact

EPILOG = """\
example:
  portfolio costs domain.pddl problem.pddl --traces traces.db --json
  portfolio costs domain.pddl problem.pddl --traces traces.db --features hour=peak region=eu
  portfolio costs domain.pddl problem.pddl --traces traces.db --objective time --json

cost = base cost + lambda * -log(1 - p_fail): summed over a plan, the risk term is -log of the probability
that every step succeeds, so the cheapest plan trades cost against the chance of failing. p_fail is the
posterior mean in the situation --features describes, with a 90% credible interval; charge is what the
default explore policy (cautious) adds to the cost at that mean: one posterior standard deviation of p_fail
where the action has recorded steps of its own (the less it is known, the dearer), nothing where it has none.
steps and fails: recorded ever; since: steps since its failure rate last changed, what p_fail rests on;
last seen: runs recorded since, and the step's timestamp where steps carry one. docs/learning.md explains
every number.

--objective time prices a step by expected_ms, its expected time to success: its learned durations of a
success and of a failure, transient failures retried up to --max-retries, a failure that ends the plan
costing --replan-ms, one with side effects --side-effect-weight replans more; cost = expected_ms / 1000.
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
    add_tenant_arguments(parser, "price with")
    add_features_arguments(parser)
    parser.add_argument(
        "--weight",
        type=weight_type,
        default=5.0,
        metavar="LAMBDA",
        help="lambda, the price of risk in cost units per nat (default: 5)",
    )
    add_objective_arguments(parser)
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
        planner = Planner(
            [FastDownward()], traces=args.traces, cost_weight=args.weight, warm=False,
            objective=args.objective, time=time_params(args), tenant=learning_tenant(args),
        )  # fmt: skip
    except (TaskInputError, FeaturesError) as error:
        return fail_bad_input(str(error))
    except store_error_types() as error:
        return fail_bad_input(str(error))
    with planner:
        if planner.model is None:
            whose = {"default": "", "*": " pooled over every tenant"}.get(
                planner.tenant, f" of tenant {planner.tenant!r}"
            )
            return fail_bad_input(
                f"{redact(args.traces)} holds no trained model{whose} yet; run `portfolio retrain` first"
            )
        costs = planner.learned_costs(task, features=features or None)
    rows = cost_rows(costs)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(costs_table(rows, timed=args.objective == "time"))
    return 0


def costs_table(rows: list[dict], timed: bool = False) -> str:
    """`cost_rows` as the plain table: p_fail with its 90% interval, the cost and what the policy charged on top,
    and what the estimate rests on (steps and failures ever, steps since its last change, when last seen)."""
    from learning.costs import last_seen_text

    width = max((len(row["action"]) for row in rows), default=6)
    head = f"{'action':<{width}}  {'base':>5}  {'p_fail':>6}  {'90% interval':>13}  {'cost':>7}  {'charge':>6}"
    head += f"  {'steps':>5}  {'fails':>5}  {'since':>5}  last seen" + (f"  {'expected ms':>11}" if timed else "")
    lines = [head]
    for row in rows:
        low, high = row.get("p_fail_90") or (row["p_fail"], row["p_fail"])
        line = (
            f"{row['action']:<{width}}  {row['base_cost']:>5g}  {row['p_fail']:>6.3f}  {f'{low:.2f}-{high:.2f}':>13}"
            f"  {row['cost']:>7.3f}  {row['charge']:>6.3f}  {row['steps']:>5}  {row['failures']:>5}"
            f"  {row['since_change']:>5}  {last_seen_text(row):<9}"
        )
        lines.append(line + (f"  {row['expected_ms']:>11.1f}" if timed else ""))
    return "\n".join(line.rstrip() for line in lines)
