"""`portfolio keys add | list | revoke`: the service's API keys, kept (hashed) in the trace store; see
`portfolio.serve.keys`."""

from __future__ import annotations

import argparse
import json
import sys

from portfolio.commands.common import add_traces_argument, fail_bad_input, missing_store, store_error_types
from traces.targets import redact

DESCRIPTION = """\
API keys for `portfolio serve`: one per agent. A key names a principal (NAME), a tenant and the scopes it
may use; the trace store keeps its SHA-256, never the key, so `add` prints it once and nothing shows it again.
A tenant's runs are its own: another tenant's key cannot replan, read or record them (404, as if they did not
exist). A running server reads the keys from the store: a new key works at once, a revoked one stops within a
second.

scopes:
"""

EPILOG = """\
examples:
  KEY=$(portfolio keys add agent-a --tenant acme --scopes plan,steps:write,read --traces traces.db)
  portfolio keys add ops --tenant acme --scopes metrics,read --rps 5 --traces traces.db
  portfolio keys list --traces traces.db
  portfolio keys revoke agent-a --traces traces.db
  curl -H "Authorization: Bearer $KEY" localhost:8765/v1/actions
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    from portfolio.serve.keys import SCOPE_HELP

    parser = subparsers.add_parser(
        "keys",
        help="create, list and revoke the service's API keys",
        description=DESCRIPTION + "\n".join(f"  {name:<12} {text}" for name, text in SCOPE_HELP.items()),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="keys_command", metavar="COMMAND")

    add = commands.add_parser(
        "add",
        help="create a key and print it (once)",
        description="Create an API key for principal NAME of TENANT with SCOPES, and print it on stdout: the "
        "only time it is shown (the store keeps its hash). The quotas default to the server's options of the "
        "same names.",
        epilog="example:\n  KEY=$(portfolio keys add agent-a --tenant acme --scopes plan,steps:write,read)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add.add_argument("name", metavar="NAME", help="the principal: letters, digits, '.', '-', '_' (at most 64)")
    add.add_argument(
        "--tenant",
        required=True,
        help="whose runs the key works on: lower-case letters, digits, '-', '_' (at most 32); 'default' is "
        "the tenant of the server's --token",
    )
    add.add_argument(
        "--scopes",
        required=True,
        metavar="S,...",
        help="comma-separated: plan, steps:write, learn, read, metrics, admin (see `portfolio keys --help`)",
    )
    add.add_argument("--rps", type=float, default=None, metavar="N", help="requests per second (default: the server's)")
    add.add_argument(
        "--max-concurrent-plans", type=int, default=None, metavar="N", help="plans in flight (default: the server's)"
    )
    add.add_argument(
        "--body-mb-per-s",
        type=float,
        default=None,
        metavar="MB",
        help="request-body MB per second (default: the server's)",
    )
    add_traces_argument(add)
    add.set_defaults(func=run_add)

    listing = commands.add_parser(
        "list",
        help="the keys: names, tenants, scopes, created, last used",
        description="Every key's name, tenant, scopes, quotas, when it was created and last used (to the "
        "minute). Never a key or its hash.",
    )
    listing.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    add_traces_argument(listing)
    listing.set_defaults(func=run_list)

    revoke = commands.add_parser(
        "revoke",
        help="delete a key: servers refuse it within a second",
        description="Delete the key NAME. Servers reading this store refuse it within a second, no restart.",
    )
    revoke.add_argument("name", metavar="NAME")
    add_traces_argument(revoke)
    revoke.set_defaults(func=run_revoke)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _open(path: str, create: bool):
    from traces.store import TraceStore

    if not create and (missing := missing_store(path)):
        raise ValueError(missing)
    return TraceStore(path)


def run_add(args: argparse.Namespace) -> int:
    from portfolio.serve.keys import add_key

    try:
        with _open(args.traces, create=True) as store:
            key = add_key(
                store,
                args.name,
                args.tenant,
                args.scopes,
                rps=args.rps,
                max_concurrent_plans=args.max_concurrent_plans,
                body_mb_per_s=args.body_mb_per_s,
            )
    except (ValueError,) + store_error_types() as error:
        return fail_bad_input(str(error))
    print(key)
    print(
        f"key {args.name!r} of tenant {args.tenant!r} created in {redact(args.traces)}: it is printed above, once; "
        "keep it now (the store holds only its hash)",
        file=sys.stderr,
    )
    return 0


def run_list(args: argparse.Namespace) -> int:
    from portfolio.serve.keys import list_keys

    try:
        with _open(args.traces, create=False) as store:
            keys = list_keys(store)
    except (ValueError,) + store_error_types() as error:
        return fail_bad_input(str(error))
    if args.json:
        print(json.dumps([k.model_dump() for k in keys], indent=2))
        return 0
    if not keys:
        print(f"no keys in {redact(args.traces)}: `portfolio keys add NAME --tenant T --scopes ...` creates one")
        return 0
    rows = [("NAME", "TENANT", "SCOPES", "CREATED", "LAST USED", "QUOTAS")]
    for k in keys:
        quotas = ", ".join(
            f"{label} {value:g}"
            for label, value in (("rps", k.rps), ("plans", k.max_concurrent_plans), ("MB/s", k.body_mb_per_s))
            if value is not None
        )
        rows.append((k.name, k.tenant, ",".join(k.scopes), k.created, k.last_used or "never", quotas or "server's"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    from portfolio.serve.keys import revoke_key

    try:
        with _open(args.traces, create=False) as store:
            revoke_key(store, args.name)
    except (ValueError,) + store_error_types() as error:
        return fail_bad_input(str(error))
    print(f"key {args.name!r} revoked: servers on {redact(args.traces)} refuse it within a second")
    return 0
