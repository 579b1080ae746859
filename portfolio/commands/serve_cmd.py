"""`portfolio serve`: the HTTP/JSON service (see `portfolio.serve.http` for the routes)."""

from __future__ import annotations

import argparse
import logging

from portfolio.commands.common import add_traces_argument, fail_bad_input, store_error_types

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve plans over HTTP/JSON",
        description="Serve a warm planner over HTTP: POST /v1/plan (PDDL texts or a JSON task -> PlanResult), "
        "POST /v1/steps (record executed steps), GET /v1/health.",
        epilog="example:\n  portfolio serve --port 8765 --traces traces.db &\n"
        "  curl -s localhost:8765/v1/plan -d '{\"domain\": \"...\", \"problem\": \"...\"}'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument("--budget", type=float, default=1.0, help="classical tier budget in seconds")
    add_traces_argument(parser, required=False)
    parser.set_defaults(func=run)

    mcp = subparsers.add_parser(
        "mcp", help="serve the planner as MCP tools over stdio",
        description="A Model Context Protocol server on stdin/stdout with the tools `plan` and `record_steps`. "
        "Register it in an MCP client as the command `portfolio mcp`.",
    )
    mcp.add_argument("--budget", type=float, default=1.0, help="classical tier budget in seconds")
    add_traces_argument(mcp, required=False)
    mcp.set_defaults(func=run_mcp)


def open_planner(args: argparse.Namespace):
    """The planner both servers share: the classical budget and, when given, the trace store. Raises the
    trace store's errors (the callers turn them into exit code 2)."""
    from portfolio.planner import Planner

    return Planner(budget_s=args.budget, traces=args.traces if args.traces_given else None)


def run_mcp(args: argparse.Namespace) -> int:
    from portfolio.serve.mcp_server import serve

    try:
        planner = open_planner(args)
    except store_error_types() as error:
        return fail_bad_input(str(error))
    with planner:
        serve(planner)
    return 0


def run(args: argparse.Namespace) -> int:
    from portfolio.serve.http import make_server

    try:
        planner = open_planner(args)
    except store_error_types() as error:
        return fail_bad_input(str(error))
    with planner:
        try:
            server = make_server(planner, args.host, args.port)
        except OSError as error:
            return fail_bad_input(f"cannot listen on {args.host}:{args.port}: {error.strerror}")
        host, port = server.server_address[:2]
        print(f"serving on http://{host}:{port}/v1/ (Ctrl-C to stop)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0
