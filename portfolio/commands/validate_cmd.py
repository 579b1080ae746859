"""`portfolio validate DOMAIN PROBLEM PLAN`: the validator's verdict on a plan file, with its precise critique."""

from __future__ import annotations

import argparse

from portfolio.commands.common import fail_bad_input

EPILOG = """\
The plan file has one action per line, like `(pick-up a)`; blank lines and `;` comments are skipped, so the
output of `portfolio plan` and Fast Downward's plan files are read as they are.

examples:
  portfolio plan domain.pddl problem.pddl > plan.txt && portfolio validate domain.pddl problem.pddl plan.txt
  portfolio validate domain.pddl problem.pddl llm-plan.txt --json

exit codes: 0 valid, 1 invalid (the message says which step and why), 2 bad input
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate", help="check a plan against a task and say precisely why it fails",
        description="Simulate PLAN from the problem's initial state: is every step applicable, is the goal "
        "reached? On failure: the 1-based step, the kind of problem (unknown-action, wrong-arity, "
        "unknown-object, wrong-type, precondition, goal) and the literals that did not hold.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("domain", help="PDDL domain file")
    parser.add_argument("problem", help="PDDL problem file")
    parser.add_argument("plan", help="plan file: one action per line")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from domains.errors import TaskInputError
    from domains.load import load_task, read_text
    from portfolio.serve.models import BadRequest
    from portfolio.serve.verdict import parse_plan_lines, verdict

    try:
        task = load_task(args.domain, args.problem)
        steps = parse_plan_lines(read_text(args.plan).splitlines(), where=args.plan)
    except (TaskInputError, BadRequest) as error:
        return fail_bad_input(str(error))
    result = verdict(task, steps)
    if args.json:
        print(result.model_dump_json(indent=2))
    elif result.valid:
        print(f"valid: {result.steps} steps, cost {result.cost:g}")
    else:
        print(f"invalid: {result.message}")
    return 0 if result.valid else 1
