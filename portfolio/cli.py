"""`portfolio`: the command line. Every command is a thin layer over a library function.

Exit codes (like Fast Downward's driver, they mean something):
  0  solved / done
  1  no plan; the status says why: unsolvable (proved by a complete method), incomplete (an incomplete search
     found nothing), unsupported (no delegate takes the task), memout, timeout, error
  2  bad input: missing or malformed file, unknown symbol, wrong arity, schema violation, unusable database,
     unknown delegate or missing option; nothing is left running
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

EXIT_SOLVED = 0
EXIT_NO_PLAN = 1
EXIT_BAD_INPUT = 2

# each command's module; `build_parser` registers only the one a command line names (the others' options, the
# service's among them, cost imports a plain `portfolio plan` has no use for), all of them for `portfolio --help`
COMMAND_MODULES = {
    "plan": "portfolio.commands.plan_cmd",
    "schema": "portfolio.commands.schema_cmd",
    "traces": "portfolio.commands.traces_cmd",
    "retrain": "portfolio.commands.retrain_cmd",
    "costs": "portfolio.commands.costs_cmd",
    "generate": "portfolio.commands.generate_cmd",
    "bench": "portfolio.commands.bench_cmd",
    "serve": "portfolio.commands.serve_cmd",
    "mcp": "portfolio.commands.serve_cmd",
    "keys": "portfolio.commands.keys_cmd",
    "validate": "portfolio.commands.validate_cmd",
}

EPILOG = """\
examples:
  portfolio plan domain.pddl problem.pddl            Fast Downward, then pyperplan, in 1 s; if they find
                                                     nothing, the goal agenda in up to 30 s more
  portfolio plan --task task.json --json             a JSON task; print the PlanResult as JSON
  portfolio schema task                              the JSON Schema of the task format
  portfolio traces import steps.jsonl                record executed steps
  portfolio retrain                                  fit failure models from the traces
  portfolio plan domain.pddl problem.pddl --traces traces.db   plan around actions that fail
  portfolio validate domain.pddl problem.pddl plan.txt         check a plan; say which step fails and why

exit codes: 0 solved, 1 no plan (JSON "status": unsolvable, incomplete, unsupported, memout, timeout or
error), 2 bad input
"""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser; with `command` (a name of `COMMAND_MODULES`), only that command's
    subparser is registered, so parsing one command imports what that command's options need and no more."""
    parser = argparse.ArgumentParser(
        prog="portfolio",
        description="A planner for agent runtimes: a hard-budgeted cascade of classical planners "
        "(Fast Downward, pyperplan) and decomposers, validated plans, and action costs learned from traces.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMAND_MODULES[command]] if command in COMMAND_MODULES else dict.fromkeys(COMMAND_MODULES.values())
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name == name:
                continue  # a command module not present in this build
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from portfolio.engine import spares

    try:
        if _command(sys.argv[1:] if argv is None else argv) == "plan":
            # `plan`'s translator worker starts now, while this process imports the planner: the Planner takes it
            from portfolio.delegates.fast_downward.translate import PRELOAD

            spares.prespawn(PRELOAD)
        return _main(argv)
    finally:
        spares.discard()  # a spare the planner did not take (bad input, --help, no Fast Downward) dies here


def _command(argv: list[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), or None."""
    return next((word for word in argv if not word.startswith("-")), None)


def _main(argv: list[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command(words))
    args = parser.parse_args(words)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # inside the try: a reader that went away is noticed here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return 130


def _reader_gone() -> int:
    """The output pipe closed (`portfolio costs ... | head`): exit 0 quietly, like `cat`. stdout is pointed at
    /dev/null so that Python's final flush of what is still buffered does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_SOLVED


if __name__ == "__main__":
    sys.exit(main())
