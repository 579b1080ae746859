"""`portfolio generate`: write a bundled domain and a generated problem of any size."""

from __future__ import annotations

import argparse
from pathlib import Path

from portfolio.commands.common import fail_bad_input


def register(subparsers: argparse._SubParsersAction) -> None:
    from domains.bundled import BUNDLED

    parser = subparsers.add_parser(
        "generate",
        help="write a bundled domain and a generated problem",
        description="Write DOMAIN's PDDL and a solvable problem of SIZE objects (blocks, balls, packages or "
        "jobs), reproducible from --seed, into --out. Prints the two paths.",
        epilog="example:\n  portfolio generate blocksworld --size 12 --seed 3 --out /tmp/bw\n"
        "  portfolio plan $(portfolio generate tools --size 5 --out /tmp/t)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("domain", choices=BUNDLED, help="bundled domain")
    parser.add_argument("--size", type=int, default=5, help="problem size (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--out", type=Path, default=Path("."), help="output folder (default: .)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from domains.bundled import write_instance

    try:
        domain, problem = write_instance(args.domain, args.size, args.seed, args.out)
    except ValueError as error:
        return fail_bad_input(str(error))
    except OSError as error:  # str() would be Python's bare "[Errno 17] File exists: '...'"
        return fail_bad_input(
            f"--out {args.out}: cannot write the domain and problem there ({error.strerror}); expected a folder "
            "(created if missing)."
        )
    print(domain, problem)
    return 0
