"""MCP server over stdio: the planner as tools for LLM agents (`portfolio mcp`).

JSON-RPC 2.0, one message per line on stdin/stdout, logs on stderr only. A tool-only server needs four methods
(initialize, notifications/initialized, tools/list, tools/call; ping is answered too), so it is written here
rather than pulling in an SDK. Tools: `plan` and `record_steps`, the same library calls as the HTTP routes.
A tool failure (bad PDDL, say) is an `isError` result with the message; a protocol failure is a JSON-RPC error.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

from pydantic import ValidationError

from domains.errors import TaskInputError
from portfolio.planner import Planner
from portfolio.serve.http import BadRequest, PlanBody, plan_request, record_steps

log = logging.getLogger(__name__)

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

TOOLS = [
    {
        "name": "plan",
        "description": "Find a validated plan. Give PDDL `domain` and `problem` texts, or `task` (the JSON task "
        "format), optionally `init` (atoms like \"(on a b)\") to plan from another state, `excluded` grounded "
        "actions, `critiques` of earlier failures, `features` (the situation learned costs depend on) and `explore` "
        "(mean, thompson, ucb). Returns the PlanResult as JSON.",
        "inputSchema": PlanBody.model_json_schema(),
    },
    {
        "name": "record_steps",
        "description": "Record executed plan steps in the trace store (learned costs come from them). "
        "`steps`: a list of step records (run_id, step, action, args, outcome, ...).",
        "inputSchema": {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "object"}}},
                        "required": ["steps"]},
    },
]


def handle(planner: Planner, message: dict[str, Any]) -> dict[str, Any] | None:
    """One JSON-RPC message in, its response out (None for notifications)."""
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification, e.g. notifications/initialized
    params = message.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "portfolio-planner", "version": "0.1.0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = call_tool(planner, params.get("name"), params.get("arguments") or {})
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"unknown method {method!r}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def call_tool(planner: Planner, name: str | None, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        if name == "plan":
            payload: Any = plan_request(planner, PlanBody.model_validate(arguments))
        elif name == "record_steps":
            payload = {"recorded": record_steps(planner, arguments)}
        else:
            return _text(f"unknown tool {name!r}; tools: plan, record_steps", error=True)
    except (TaskInputError, BadRequest, ValidationError) as error:
        return _text(f"{type(error).__name__}: {error}", error=True)
    return _text(json.dumps(payload))


def _text(text: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def serve(planner: Planner, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> None:
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as error:
            response: dict[str, Any] | None = {
                "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"parse error: {error.msg}"},
            }
        else:
            response = handle(planner, message) if isinstance(message, dict) else {
                "jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "expected a JSON object"}}
        if response is not None:
            stdout.write(json.dumps(response) + "\n")
            stdout.flush()
