"""`portfolio validate DOMAIN PROBLEM PLAN` (or `--task FILE PLAN`): the validator's verdict on a plan file, with
its precise critique."""

from __future__ import annotations

import argparse

from portfolio.commands.common import fail_bad_input

EPILOG = """\
The plan file has one action per line, like `(pick-up a)`, optionally numbered (`0: (pick-up a)`, or IPC's
`0.000: (pick-up a) [1]`); blank lines and `;` comments are skipped, so the output of `portfolio plan` and Fast
Downward's plan files are read as they are. A JSON task (`portfolio schema task`) is given with --task.

examples:
  portfolio plan domain.pddl problem.pddl > plan.txt && portfolio validate domain.pddl problem.pddl plan.txt
  portfolio validate domain.pddl problem.pddl llm-plan.txt --json
  portfolio validate --task domains/examples/blocks-task.json plan.txt

exit codes: 0 valid, 1 invalid (the message says which step and why), 2 bad input
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check a plan against a task and say precisely why it fails",
        description="Simulate PLAN from the problem's initial state: is every step applicable, is the goal "
        "reached? On failure: the 1-based step, the kind of problem (unknown-action, wrong-arity, "
        "unknown-object, wrong-type, precondition, goal) and the literals that did not hold.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="DOMAIN PROBLEM PLAN (PDDL domain and problem files, then the plan file), or PLAN alone with --task",
    )
    parser.add_argument("--task", metavar="FILE", help="a JSON task file instead of DOMAIN PROBLEM")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from domains.errors import TaskInputError
    from domains.load import load_json_task, load_task, read_text
    from portfolio.serve.models import BadRequest
    from portfolio.serve.verdict import parse_plan_lines, verdict

    wanted = 1 if args.task else 3
    if len(args.files) != wanted:
        return fail_bad_input(
            "give DOMAIN PROBLEM PLAN, or --task FILE PLAN"
            + f" (got {len(args.files)} file{'s' if len(args.files) != 1 else ''})"
        )
    *task_files, plan = args.files
    try:
        task = load_json_task(args.task) if args.task else load_task(*task_files)
        steps = parse_plan_lines(read_text(plan).splitlines(), where=plan)
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
