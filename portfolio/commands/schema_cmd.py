"""`portfolio schema`: print JSON Schemas of the formats the CLI and service read and write."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schema",
        help="print a JSON Schema (task, result, step)",
        description="Print the JSON Schema of the JSON task format (task), the PlanResult printed by "
        "`plan --json` (result), or a trace step record (step).",
    )
    parser.add_argument("which", choices=["task", "result", "step"], help="which schema")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.which == "task":
        from domains.json_task import task_json_schema

        schema = task_json_schema()
    elif args.which == "result":
        from portfolio.engine.results import PlanResult

        schema = PlanResult.model_json_schema()
    else:
        from traces.records import StepRecord

        schema = StepRecord.model_json_schema()
    print(json.dumps(schema, indent=2))
    return 0
