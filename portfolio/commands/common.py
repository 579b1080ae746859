"""Helpers the subcommands share: the --traces option and the one-paragraph bad-input exit."""

from __future__ import annotations

import argparse
import os
import sys

EXIT_BAD_INPUT = 2
DEFAULT_TRACES = "traces.db"


class _TracesAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.traces_given = True


def add_traces_argument(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """`--traces PATH`: the trace store. Default: env PORTFOLIO_TRACES, else ./traces.db. With
    `required=False` (planning), learned costs are used only when --traces or PORTFOLIO_TRACES is given."""
    from_env = os.environ.get("PORTFOLIO_TRACES")
    help_text = "SQLite trace store (default: $PORTFOLIO_TRACES or ./traces.db)"
    if not required:
        help_text = ("SQLite trace store whose latest models set learned costs and choose which Fast Downward "
                     "searches race on a domain it has records of; the plan is recorded there "
                     "(default: $PORTFOLIO_TRACES)")
    parser.add_argument("--traces", metavar="PATH", default=from_env or DEFAULT_TRACES, action=_TracesAction,
                        help=help_text)
    parser.set_defaults(traces_given=bool(from_env) or required)


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
