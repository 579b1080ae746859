"""The MCP tools as a real client sees them: the official SDK's stdio client session against `portfolio mcp`, and
its streamable HTTP client against /mcp on the HTTP service (behind the token)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from support import REPO
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, serve_in_thread, validated

TOOLS = {"plan", "replan", "validate", "record_steps", "action_stats", "costs", "retrain"}
STATE = ["(clear a)", "(on a b)", "(ontable b)", "(clear c)", "(ontable c)", "(clear d)", "(ontable d)", "(handempty)"]


def server_parameters(traces):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        cwd=REPO,
        # the SDK passes only these and its own few (HOME, PATH): the session's throw-away translation cache
        # (tests/conftest.py), not the user's, which every test process would share
        env={"PYTHONPATH": str(REPO), "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]},
        args=["-m", "portfolio.cli", "mcp", "--delegates", "fast-downward,pyperplan", "--traces", str(traces)],
    )


async def exercise(session) -> dict:
    """List the tools and call each one; return what the assertions need."""
    await session.initialize()
    listing = (await session.list_tools()).tools
    out: dict = {"tools": {tool.name: tool for tool in listing}}
    out["plan"] = await session.call_tool("plan", {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4})
    run_id = out["plan"].structured_content["run_id"]
    out["replan"] = await session.call_tool(
        "replan", {"run_id": run_id, "state": STATE, "quality": "first", "weight": 2}
    )
    out["bad"] = await session.call_tool("plan", {"domain": "(define (domain", "problem": BLOCKS_4})
    out["validate"] = await session.call_tool(
        "validate", {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "plan": ["(pick-up b)", "(pick-up c)"]}
    )
    steps = [{"run_id": run_id, "step": i, "action": "pick-up", "args": ["b"], "outcome": "success"} for i in range(3)]
    out["steps"] = await session.call_tool("record_steps", {"steps": steps})
    out["stats"] = await session.call_tool("action_stats", {})
    # a misspelled argument: refused, as HTTP refuses an unknown field (it used to plan without the exclusion)
    out["misspelled"] = await session.call_tool(
        "plan", {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "exclueded": ["(pick-up b)"]}
    )
    out["retrain"] = await session.call_tool("retrain", {"prior_mean": 0.05})
    out["stats_after"] = await session.call_tool("action_stats", {})
    return out


def check(out: dict) -> None:
    from domains.model import Atom

    tools = out["tools"]
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        assert tool.input_schema["type"] == "object" and tool.description
    for name in ("plan", "replan"):
        assert set(tools[name].input_schema["properties"]) >= {"explore", "quality", "weight", "budget"}, name
    assert set(tools["plan"].input_schema["properties"]) >= {"domain", "problem", "task", "init"}
    plan = out["plan"]
    assert not plan.is_error and plan.structured_content["status"] == "solved"
    assert json.loads(plan.content[0].text) == plan.structured_content  # text for text-only clients
    assert validated(BLOCKS_DOMAIN, BLOCKS_4, plan.structured_content["plan"])
    replan = out["replan"].structured_content
    state = frozenset(Atom(a.strip("()").split()[0], tuple(a.strip("()").split()[1:])) for a in STATE)
    assert replan["status"] == "solved" and validated(BLOCKS_DOMAIN, BLOCKS_4, replan["plan"], init=state)
    assert out["bad"].is_error and "PDDLSyntaxError" in out["bad"].content[0].text
    verdict = out["validate"].structured_content
    assert verdict["valid"] is False and verdict["failed_step"] == 2 and "(handempty)" in verdict["missing"]
    assert out["steps"].structured_content == {"recorded": 3, "skipped": 0, "conflicts": []}
    rows = {row["action"]: row for row in out["stats"].structured_content["actions"]}
    assert rows["pick-up"]["steps"] == 3
    misspelled = out["misspelled"]
    assert misspelled.is_error and "exclueded" in misspelled.content[0].text, misspelled.content
    assert out["retrain"].structured_content["version"] == 1, out["retrain"].content
    assert out["stats_after"].structured_content["model_version"] == 1
    check_schemas_match_http(tools)


def check_schemas_match_http(tools) -> None:
    """Each tool's input schema is its HTTP body's (the fields, their types and descriptions), less `wait`."""
    from portfolio.serve.models import PlanBody, ReplanBody, StepsBody, ValidateBody

    for name, body in (
        ("plan", PlanBody),
        ("replan", ReplanBody),
        ("validate", ValidateBody),
        ("record_steps", StepsBody),
    ):
        http = body.model_json_schema()["properties"]
        http.pop("wait", None)
        assert tools[name].input_schema["properties"] == http, name
        assert tools[name].input_schema.get("additionalProperties") is False, name


def test_stdio_client_session_against_portfolio_mcp(tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    async def main() -> dict:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(server_parameters(tmp_path / "t.db"), errlog=quiet) as (read, write):
                async with ClientSession(read, write) as session:
                    return await exercise(session)

    check(anyio.run(main))


def test_streamable_http_client_behind_the_token(tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def main(url: str, token: str) -> dict:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with streamable_http_client(url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    return await exercise(session)

    with serve_in_thread(config(traces=str(tmp_path / "t.db")), token="tok") as (url, _):
        check(anyio.run(main, url, "tok"))
        with pytest.raises(Exception):  # noqa: B017 - wrong token: 401; the SDK wraps it in an ExceptionGroup
            anyio.run(main, url, "wrong")


def test_a_malformed_message_does_not_end_the_stdio_server(tmp_path):
    """Raw JSON-RPC: tools/call whose params is not an object, then garbage, then a valid request."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "not an object"},
        "this is not JSON",
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    lines = "\n".join(m if isinstance(m, str) else json.dumps(m) for m in messages) + "\n"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "portfolio.cli",
            "mcp",
            "--delegates",
            "fast-downward",
            "--traces",
            str(tmp_path / "t.db"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert process.stdin and process.stdout
        process.stdin.write(lines)
        process.stdin.flush()
        answers = {}
        while 3 not in answers:
            line = process.stdout.readline()
            assert line, "the server ended"
            message = json.loads(line)
            if "id" in message:
                answers[message["id"]] = message
        # The SDK (2.3.0) dropped both without an answer; JSON-RPC 2.0 asks for an error, with the id if known.
        assert answers[2]["error"]["code"] == -32600
        garbage = [m for m in answers.values() if m.get("id") is None]
        assert [m["error"]["code"] for m in garbage] == [-32700]
        assert {tool["name"] for tool in answers[3]["result"]["tools"]} == TOOLS
        assert process.poll() is None
    finally:
        process.stdin.close()
        process.wait(timeout=15)
    assert process.returncode == 0


def test_mcp_help_names_every_tool_the_server_serves():
    """`portfolio mcp --help` is where a user learns what the server offers: every tool, none missing."""
    from portfolio.serve.mcp_server import TOOL_SCOPES

    out = subprocess.run(
        [sys.executable, "-m", "portfolio.cli", "mcp", "--help"], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    text = " ".join(out.split())
    missing = [tool for tool in TOOL_SCOPES if tool not in text]
    assert missing == [], f"portfolio mcp --help does not name {missing}"
