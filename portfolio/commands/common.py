"""Helpers the subcommands share: the --traces option and the one-paragraph bad-input exit."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

EXIT_BAD_INPUT = 2
DEFAULT_TRACES = "traces.db"


class _TracesAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.traces_given = True


def add_traces_argument(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """`--traces PATH|URL`: the trace store, an SQLite file or a PostgreSQL database
    (`postgresql://user@host/db`, `traces.targets`). Default: env PORTFOLIO_TRACES, else ./traces.db. With
    `required=False` (planning), learned costs are used only when --traces or PORTFOLIO_TRACES is given."""
    from_env = os.environ.get("PORTFOLIO_TRACES")
    where = (
        "an SQLite file, or a PostgreSQL database as postgresql://USER@HOST[:PORT]/DB (the password from "
        "PGPASSWORD or ~/.pgpass, or in the URL: it is never shown)"
    )
    help_text = f"the trace store: {where} (default: $PORTFOLIO_TRACES or ./traces.db)"
    if not required:
        help_text = (
            "trace store whose latest models set learned costs and choose which Fast Downward "
            "searches race on a domain it has records of; the plan is recorded there: "
            f"{where} (default: $PORTFOLIO_TRACES)"
        )
    parser.add_argument(
        "--traces", metavar="PATH|URL", default=from_env or DEFAULT_TRACES, action=_TracesAction, help=help_text
    )
    parser.set_defaults(traces_given=bool(from_env) or required)


def tenant_type(text: str) -> str:
    """A tenant's name, as `portfolio keys add --tenant` takes it."""
    import re

    if text != "default" and not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,31}", text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a tenant's name (1 to 32 characters, lower-case letters, digits, '-' and '_', "
            "starting with a letter or digit) or 'default'"
        )
    return text


def add_tenant_arguments(parser: argparse.ArgumentParser, what: str, every: bool = False) -> None:
    """`--tenant NAME` and `--pooled` (and, with `every`, `--all-tenants`): whose failure model `what` is
    (`traces.tenants`); `learning_tenant` reads them."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--tenant",
        type=tenant_type,
        default="default",
        metavar="NAME",
        help=f"{what} the model of tenant NAME, learned from its steps alone (default: 'default', the tenant whose "
        "runs the CLI, the Python API and the server's --token record)",
    )
    group.add_argument(
        "--pooled", action="store_true", help=f"{what} the model of every tenant's steps (`serve --pool-learning`)"
    )
    if every:
        group.add_argument(
            "--all-tenants", action="store_true", help="fit each tenant's model, as a retrain of the service does"
        )


def learning_tenant(args: argparse.Namespace) -> str:
    """The tenant `add_tenant_arguments` chose ("*" for the pooled model)."""
    from traces.tenants import POOLED

    return POOLED if args.pooled else args.tenant


def missing_store(path: str) -> str | None:
    """The error for a command that reads a trace store given a path where there is none (None if there is one):
    opening it would create an empty database, so a typo in --traces printed "no steps" and left a file behind.
    A PostgreSQL URL is never missing here: the database must exist already, and opening it says so if not."""
    from traces.targets import is_url

    if path == ":memory:" or is_url(path) or os.path.exists(path):
        return None
    return (
        f"{path}: no trace store there; expected an existing SQLite trace file (`portfolio traces import` or "
        "`portfolio plan --traces` creates one)"
    )


def add_cost_arguments(parser: argparse.ArgumentParser, request_field: bool = False) -> None:
    """`--weight` (lambda of learned costs) and `--quality` (how a search with costs trades plan cost for time).
    `request_field`: the server's defaults, which a request's own `weight` / `quality` override."""
    from portfolio.delegates.fast_downward.searches import QUALITIES

    wins = " (a request's own field wins)" if request_field else ""
    parser.add_argument(
        "--weight",
        type=weight_type,
        default=None,
        metavar="LAMBDA",
        help="lambda of learned costs, cost = base + LAMBDA * -log(1 - p_fail): the price of risk "
        f"in cost units per nat (default: 5; 0 plans on base costs alone){wins}",
    )
    parser.add_argument(
        "--quality",
        choices=QUALITIES,
        default=None,
        help="with costs (learned or the task's own): anytime (default) returns the cheapest plan "
        "found once optimality is proved (on small tasks A* runs in this process first, delegate fd-inprocess, "
        "then races) or a quarter of the search's time has passed with a plan; optimal waits for the proof "
        "(or the deadline); first returns the "
        f"first cost-aware plan (weighted A*, fastest, often dearer){wins}",
    )


def add_objective_arguments(parser: argparse.ArgumentParser, request_field: bool = False) -> None:
    """`--objective` and the time objective's `--side-effect-weight`, `--replan-ms`, `--max-retries`
    (`learning.objective`); `time_params(args)` reads them back. `request_field`: a request's own objective wins."""
    from learning.objective import DEFAULT_RETRIES, DEFAULT_SIDE_EFFECT_WEIGHT, OBJECTIVES

    wins = " (a request's own field wins)" if request_field else ""
    parser.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default=None,
        help="what learned costs price: risk (default), base + weight * -log(1 - p_fail), every failure ends "
        "the plan; time, a step's expected ms to success from the durations learned, transient failures "
        f"retried, plan-ending ones costing a replan (--weight does not apply){wins}",
    )
    parser.add_argument(
        "--side-effect-weight",
        type=weight_type,
        default=DEFAULT_SIDE_EFFECT_WEIGHT,
        metavar="W",
        help="time objective: replans a failure that left side effects costs on top of its own "
        f"(default: {DEFAULT_SIDE_EFFECT_WEIGHT:g})",
    )
    parser.add_argument(
        "--replan-ms",
        type=weight_type,
        default=None,
        metavar="MS",
        help="time objective: what a failure that ends the plan costs, in ms (default: learned from the "
        "traces, the mean time of a run's steps)",
    )
    parser.add_argument(
        "--max-retries",
        type=retries_type,
        default=DEFAULT_RETRIES,
        metavar="N",
        help=f"time objective: the runtime's retries of a transient failure (default: {DEFAULT_RETRIES}, the "
        "agent loop's)",
    )


def retries_type(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def time_params(args: argparse.Namespace) -> Any:
    """The `learning.objective.TimeParams` of `add_objective_arguments`' options."""
    from learning.objective import TimeParams

    return TimeParams(args.max_retries, args.replan_ms, args.side_effect_weight)


def is_seconds(value: float) -> bool:
    """A budget in seconds: finite and > 0 (`seconds_type`, and the commands that check theirs after parsing)."""
    return math.isfinite(value) and value > 0


def seconds_type(text: str) -> float:
    """argparse's type for a budget in seconds: finite and > 0, else an argparse error (exit 2). Why: `inf`
    would reach the delegates (select() overflows: a traceback mid-plan) and, in `serve`, the workers' JSON
    configuration as null (every worker dies at birth); 0, negatives and nan would leave a tier no time without a
    word."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not is_seconds(value):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def weight_type(text: str) -> float:
    """argparse's view of `portfolio.planner.check_weight`: one rule for --weight and `Planner(cost_weight=)`."""
    from portfolio.cost_cache import check_weight

    try:
        return check_weight(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}") from None


def fail_bad_input(message: str) -> int:
    """Print a one-paragraph message (no traceback) and return exit code 2."""
    print(f"portfolio: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def store_error_types() -> tuple[type[BaseException], ...]:
    try:
        from traces.errors import TraceStoreError
    except ImportError:  # pragma: no cover
        return ()
    return (TraceStoreError,)
