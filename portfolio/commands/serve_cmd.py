"""`portfolio serve` (HTTP, FastAPI + uvicorn) and `portfolio mcp` (MCP over stdio): see `portfolio.serve`."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from portfolio.commands.common import (
    add_cost_arguments,
    add_objective_arguments,
    add_traces_argument,
    fail_bad_input,
    seconds_type,
    store_error_types,
)
from portfolio.commands.serve_access import add_access_arguments, option_error, quota_defaults, warn_if_reachable

log = logging.getLogger(__name__)

# the ServiceConfig fields whose option is not their name spelled as one (`option_error`)
FLAGS = {
    "budget_s": "--budget",
    "max_budget_s": "--max-budget",
    "decomposer_budget_s": "--decomposer-budget",
    "memory_limit_mb": "--memory-limit",
    "validate_budget_s": "--validate-budget",
}

SERVE_DESCRIPTION = """\
Serve the planner over HTTP to many agents: a pool of warm planner worker processes (each with its own
cascade), a bounded queue (503 + Retry-After when full), per-request budgets capped by --max-budget.
Routes: POST /v1/plan, /v1/replan, /v1/validate, /v1/steps, /v1/retrain; GET /v1/actions, /v1/jobs/{id},
/v1/health, /metrics (Prometheus), /openapi.json and /docs (Swagger UI, its files served here: no CDN);
MCP (streamable HTTP) at /mcp.

Every route but /v1/health needs `Authorization: Bearer KEY`: an API key of the trace store (`portfolio keys
add`: one per agent, with a tenant and scopes; runs are private to their tenant) or the --token (an admin of
the default tenant). Without either the server refuses to start; --insecure serves without keys, on a loopback
address only. Requests must name the server in Host (the bind address, localhost, 127.0.0.1, ::1, and each
--allowed-host), and a browser's Origin likewise; request bodies are application/json. Each key has quotas
(--rps, --body-mb-per-s, --max-concurrent-plans, --retrains-per-minute: the defaults for keys that set none);
over one, 429 with Retry-After. --public-docs lets a browser read /docs and /openapi.json without a key.
Each tenant's plans are priced by a failure model learned from its own steps (--pool-learning: one model of
every tenant's), and a retrain holds back one key's batch that departs sharply from what the model knew while no
other key agrees (--no-poison-guard: it fits everything).
SIGTERM drains in-flight requests for --drain seconds, then stops every worker and planner process.
"""

SERVE_EPILOG = """\
example:
  KEY=$(portfolio keys add agent-a --tenant acme --scopes plan,steps:write,read --traces traces.db)
  portfolio serve --workers 2 --traces traces.db &
  curl -s -H "Authorization: Bearer $KEY" --json '{"domain": "(define (domain ...", "problem": "..."}' \\
       localhost:8765/v1/plan

  portfolio serve --insecure            local tests only: no keys, loopback only
  portfolio serve --host 0.0.0.0 --allowed-host planner.internal --traces traces.db
                                        reachable as planner.internal from other machines
"""


def _add_planner_arguments(parser: argparse.ArgumentParser, workers_default: int | None) -> None:
    workers_help = (
        "planner worker processes (default: the cores available)"
        if workers_default is None
        else (f"planner worker processes (default: {workers_default})")
    )
    parser.add_argument("--workers", type=int, default=workers_default, metavar="N", help=workers_help)
    parser.add_argument(
        "--queue",
        type=int,
        default=64,
        metavar="N",
        help="requests that may wait for a busy pool before 503s (default 64)",
    )
    parser.add_argument(
        "--budget",
        type=seconds_type,
        default=1.0,
        metavar="S",
        help="classical tier budget when a request gives none (default 1.0)",
    )
    parser.add_argument(
        "--max-budget", type=seconds_type, default=30.0, metavar="S", help="cap on a request's own budget (default 30)"
    )
    parser.add_argument(
        "--decomposer-budget",
        type=seconds_type,
        default=30.0,
        metavar="S",
        help="seconds for the decomposer tier (default 30)",
    )
    parser.add_argument(
        "--delegates",
        default=None,
        metavar="LIST",
        help="cascade order, as for `portfolio plan` (default: fast-downward,pyperplan,goal-agenda; "
        "with --llm-url: fast-downward,pyperplan,llm,goal-agenda)",
    )
    parser.add_argument("--llm-url", default=None, metavar="URL", help="OpenAI-compatible base URL (see plan)")
    parser.add_argument("--llm-model", default=None, metavar="NAME", help="model name for --llm-url")
    parser.add_argument(
        "--memory-limit",
        type=int,
        default=None,
        metavar="MB",
        help="memory budget of one request, shared by the planner processes it runs in (each "
        "capped at an equal share), and the cap of one validation (default: half the machine's "
        "memory shared among the planner workers and validators); the server's own process keeps its "
        "large request bodies within it too, less 256 MB for itself (a step batch costs it ~20x its size)",
    )
    parser.add_argument(
        "--fd-workers",
        type=int,
        default=None,
        metavar="N",
        help="searches each worker races per task (default: the cores a worker has to itself, "
        "at least 1; see `portfolio plan --fd-workers`)",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="on-disk translation cache the workers share (default: as `portfolio plan`)",
    )
    parser.add_argument("--no-cache", action="store_true", help="workers neither read nor write the cache")
    parser.add_argument(
        "--validate-budget",
        type=seconds_type,
        default=10.0,
        metavar="S",
        help="seconds a plan check may take in its validator process before it is killed and "
        "the request answered 422 (default 10)",
    )
    parser.add_argument(
        "--no-carry-over",
        dest="carry_over",
        action="store_false",
        help="kill Fast Downward's work when its share of the classical tier ends (default: it "
        "goes on beside the later delegates until the request's last deadline; see `portfolio "
        "plan --help`)",
    )
    add_traces_argument(parser, required=False)
    parser.add_argument(
        "--pool-learning",
        action="store_true",
        help="learn one failure model from every tenant's steps, which prices every tenant's plans (default: a "
        "model per tenant, from its own steps, so that no tenant's reports move another's costs)",
    )
    parser.add_argument(
        "--no-poison-guard",
        dest="poison_guard",
        action="store_false",
        help="fit every recorded step (default: a retrain holds back a batch of one principal's steps whose "
        "failure rate departs sharply from what the model knew of the action while no other agent's recent "
        "steps agree; docs/service-security.md)",
    )
    from learning.explore import EXPLORE_POLICIES, renamed

    parser.add_argument(
        "--explore",
        type=renamed,  # the old names (mean, ucb) map to their policies, with a warning
        choices=EXPLORE_POLICIES,
        default=None,
        help="how learned costs explore when a request does not say (its `explore` field wins): "
        "cautious (default), thompson or optimistic, as `portfolio plan --explore`",
    )
    add_cost_arguments(parser, request_field=True)
    add_objective_arguments(parser, request_field=True)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve plans over HTTP (FastAPI) to many agents",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    _add_planner_arguments(parser, workers_default=None)
    add_access_arguments(parser)
    parser.add_argument("--max-body", type=int, default=32, metavar="MB", help="request body limit (default 32)")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="close a connection that sends nothing for this long (default 10)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="close a connection whose request has not arrived whole this long after its first byte (default 60)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="open connections at most (default: the descriptor limit, `ulimit -n`, less a reserve for the "
        "workers, the trace store and accept bursts, at most 1024); a new connection over it takes the place of "
        "the one idle longest, and is closed only when none is idle",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=int,
        default=None,
        metavar="N",
        help="open connections of one client address at most, in the same way (default: half of "
        "--max-connections; behind a reverse proxy every client has the proxy's address)",
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=2.5,
        metavar="S",
        help="on SIGTERM, seconds in-flight requests may take to finish (default 2.5); the "
        "workers then get 1 s to stop, so the server exits within about S + 1.5 s",
    )
    parser.set_defaults(func=run)

    mcp = subparsers.add_parser(
        "mcp",
        help="serve the planner as MCP tools over stdio",
        description="A Model Context Protocol server on stdin/stdout (official MCP SDK) with the tools plan, "
        "replan, validate, record_steps, action_stats, costs and retrain. Register it in an MCP client as "
        "`portfolio mcp`.",
    )
    _add_planner_arguments(mcp, workers_default=1)
    mcp.set_defaults(func=run_mcp)


def service_config(args: argparse.Namespace):
    """The `ServiceConfig` the options describe; ValueError with a readable message when they are wrong."""
    from pydantic import ValidationError

    from portfolio.commands.plan_cmd import delegate_names
    from portfolio.delegates.registry import CLASSICAL_DELEGATES, DECOMPOSER_DELEGATES
    from portfolio.engine import limits
    from portfolio.serve.config import ServiceConfig
    from portfolio.serve.pool import default_workers

    workers = args.workers if args.workers is not None else default_workers()
    delegates = delegate_names(args)
    unknown = [n for n in delegates if n not in CLASSICAL_DELEGATES + DECOMPOSER_DELEGATES]
    if unknown or not delegates:
        raise ValueError(
            f"unknown delegate {unknown[0] if unknown else '(none)'!r}; expected a comma-separated "
            f"list of: {', '.join(CLASSICAL_DELEGATES + DECOMPOSER_DELEGATES)}"
        )
    try:
        return ServiceConfig(
            workers=workers,
            queue=args.queue,
            budget_s=args.budget,
            max_budget_s=args.max_budget,
            decomposer_budget_s=args.decomposer_budget,
            delegates=delegates,
            traces=args.traces if args.traces_given else None,
            llm_url=args.llm_url,
            llm_model=args.llm_model,
            # the default is shared by workers + validators; 0 is refused like any other bad limit, not read as
            # "not given"
            memory_limit_mb=limits.default_limit_mb(2 * workers) if args.memory_limit is None else args.memory_limit,
            fd_workers=args.fd_workers,
            cache_dir=args.cache_dir,
            translation_cache=not args.no_cache,
            explore=args.explore,
            quality=args.quality,
            weight=args.weight,
            objective=args.objective,
            side_effect_weight=args.side_effect_weight,
            replan_ms=args.replan_ms,
            max_retries=args.max_retries,
            carry_over=args.carry_over,
            validate_budget_s=args.validate_budget,
            pool_learning=args.pool_learning,
            poison_guard=args.poison_guard,
        )
    except ValidationError as error:
        raise option_error(error, FLAGS) from None


def open_service(args: argparse.Namespace):
    from portfolio.serve.service import Service

    return Service(service_config(args))


def run_mcp(args: argparse.Namespace) -> int:
    import anyio

    from portfolio.serve.mcp_server import serve_stdio

    try:
        service = open_service(args)
    except (ValueError,) + store_error_types() as error:
        return fail_bad_input(str(error))
    anyio.run(serve_stdio, service)
    return 0


def run(args: argparse.Namespace) -> int:
    import socket

    from portfolio.serve.connections import ConnectionLimits, uvicorn_config
    from portfolio.serve.http import create_app

    if args.max_body <= 0 or args.drain < 0:
        return fail_bad_input("--max-body must be positive and --drain not negative")
    if (
        args.idle_timeout <= 0
        or args.request_timeout <= 0
        or (args.max_connections or 1) <= 0
        or (args.max_connections_per_client or 1) <= 0
    ):
        return fail_bad_input(
            "--idle-timeout, --request-timeout, --max-connections and --max-connections-per-client must be positive"
        )
    if not 0 <= args.port <= 65535:  # checked before the workers start: bind() raised OverflowError after
        return fail_bad_input(f"--port {args.port}: expected a port number from 0 to 65535 (0 picks a free one)")
    from portfolio.serve.startup import check_credentials

    try:
        quotas = quota_defaults(args)
    except ValueError as error:
        return fail_bad_input(str(error))
    try:
        service = open_service(args)
        check_credentials(args.token, service.store, args.insecure, args.host)
    except (ValueError,) + store_error_types() as error:
        return fail_bad_input(str(error))
    try:
        sock = socket.create_server((args.host, args.port))
    except OSError as error:
        return fail_bad_input(f"cannot listen on {args.host}:{args.port}: {error.strerror}")
    app = create_app(
        service,
        token=args.token,
        max_body_bytes=args.max_body * 1024 * 1024,
        host=args.host,
        public_docs=args.public_docs,
        insecure=args.insecure,
        allowed_hosts=args.allowed_host,
        quotas=quotas,
    )
    warn_if_reachable(args)
    config = uvicorn_config(
        app,
        ConnectionLimits(
            idle_s=args.idle_timeout,
            request_s=args.request_timeout,
            max_connections=args.max_connections,
            max_per_client=args.max_connections_per_client,
            workers=service.config.workers + (service.config.validators or service.config.workers),
        ),
        log_level="warning",
        timeout_graceful_shutdown=args.drain,
        lifespan="on",
    )
    host, port = sock.getsockname()[:2]
    print(
        f"serving on http://{host}:{port}/v1/ with {service.config.workers} planner workers "
        f"(Ctrl-C or SIGTERM to stop)",
        flush=True,
    )
    _server_class()(config).run(sockets=[sock])
    # Every worker and planner process is stopped and every write committed by now. Skip the interpreter's
    # teardown of the heap (measured: 1.5 s with the MCP SDK and scikit-learn loaded on a loaded 2-core machine),
    # which would otherwise push SIGTERM-to-exit past 5 s. Only the CLI ends this way; the app and service can be
    # embedded.
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


def _server_class():
    from portfolio.serve.connections import Server as GuardedServer

    class Server(GuardedServer):
        """uvicorn re-raises SIGTERM after its graceful shutdown (exit status -15); a service that drained and
        stopped every worker has shut down as asked and exits 0."""

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()

    return Server
