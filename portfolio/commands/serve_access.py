"""`portfolio serve`'s options about who may call it: --token, --insecure, --allowed-host, --public-docs and the
per-key quota defaults (`portfolio.serve.quotas`); see `portfolio.serve.http` and docs/service-security.md."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

log = logging.getLogger(__name__)


def add_access_arguments(parser: argparse.ArgumentParser) -> None:
    """--token, --insecure, --allowed-host, --public-docs and the quota defaults (--rps, --body-mb-per-s,
    --max-concurrent-plans, --retrains-per-minute)."""
    parser.add_argument(
        "--token",
        default=os.environ.get("PORTFOLIO_TOKEN"),
        metavar="TOKEN",
        help="one bearer token acting as an admin of the default tenant, beside the API keys of --traces "
        "(default: $PORTFOLIO_TOKEN; prefer the variable, arguments show in `ps`; an empty one is an error)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="serve every request without a key, as an admin of the default tenant: for local tests, and only "
        "on a loopback --host (default: refuse to start without --token or a key in --traces)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients reach the server by, accepted in the Host and Origin headers beside the "
        "bind address, localhost, 127.0.0.1 and ::1 (repeatable; any port); other Hosts get 421, other Origins 403",
    )
    parser.add_argument(
        "--public-docs",
        action="store_true",
        help="serve /docs, its assets and /openapi.json without a key, so a browser can read them (GET and "
        "HEAD only; every /v1 operation, /metrics and /mcp still need a key; default: private)",
    )
    from portfolio.serve.quotas import QuotaDefaults

    quota = QuotaDefaults()
    parser.add_argument(
        "--rps",
        type=float,
        default=quota.rps,
        metavar="N",
        help=f"requests per second per key, for keys that set none (default {quota.rps:g}; bursts of a second's worth)",
    )
    parser.add_argument(
        "--body-mb-per-s",
        type=float,
        default=quota.body_mb_per_s,
        metavar="MB",
        help=f"request-body megabytes per second per key, for keys that set none (default {quota.body_mb_per_s:g})",
    )
    parser.add_argument(
        "--max-concurrent-plans",
        type=int,
        default=quota.max_concurrent_plans,
        metavar="N",
        help="plans and replans one key may have in flight at once, for keys that set none (default "
        f"{quota.max_concurrent_plans})",
    )
    parser.add_argument(
        "--retrains-per-minute",
        type=float,
        default=quota.retrains_per_minute,
        metavar="N",
        help="retrains one key may start per minute (default "
        f"{quota.retrains_per_minute:g}); a retrain asked for while one runs joins it and is free",
    )


def quota_defaults(args: argparse.Namespace):
    """The `QuotaDefaults` the options give; ValueError naming the option when one is out of range."""
    from pydantic import ValidationError

    from portfolio.serve.quotas import QuotaDefaults

    try:
        return QuotaDefaults(
            rps=args.rps,
            body_mb_per_s=args.body_mb_per_s,
            max_concurrent_plans=args.max_concurrent_plans,
            retrains_per_minute=args.retrains_per_minute,
        )
    except ValidationError as error:
        raise option_error(error) from None


def option_error(error: ValidationError, renamed: Mapping[str, str] | None = None) -> ValueError:
    """A ValueError naming the option behind the first field a pydantic `error` refuses: `renamed[field]` for a
    field whose option is spelled otherwise (`budget_s`: --budget), else the field's name as an option."""
    first = error.errors()[0]
    name = str(first["loc"][0])
    option = (renamed or {}).get(name, "--" + name.replace("_", "-"))
    return ValueError(f"{option}: {first['msg']}")


def warn_if_reachable(args: argparse.Namespace) -> None:
    """On an address other machines reach, say so, and which Host names the server answers for."""
    from portfolio.serve.origins import AllowList, is_loopback

    if not is_loopback(args.host):
        names = ", ".join(AllowList(args.host, args.allowed_host).names)
        log.warning(
            "listening on %s, reachable from other machines: requests must name one of %s as Host "
            "(add the names clients use with --allowed-host)",
            args.host,
            names,
        )
