"""`portfolio mcp` as an MCP client sees it: a real subprocess speaking JSON-RPC over stdio."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import IPC


def test_mcp_handshake_list_and_plan_call():
    domain = (IPC / "blocks" / "domain.pddl").read_text()
    problem = (IPC / "blocks" / "probBLOCKS-4-0.pddl").read_text()
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "plan", "arguments": {"domain": domain, "problem": problem}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "plan", "arguments": {"domain": "(define (domain", "problem": problem}}},
        {"jsonrpc": "2.0", "id": 5, "method": "no/such"},
    ]
    run = subprocess.run([sys.executable, "-m", "portfolio.cli", "mcp"], input="\n".join(map(json.dumps, messages)),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    responses = {r["id"]: r for r in map(json.loads, run.stdout.splitlines())}
    assert set(responses) == {1, 2, 3, 4, 5}  # the notification got no answer
    assert responses[1]["result"]["protocolVersion"] == "2025-06-18"
    assert {t["name"] for t in responses[2]["result"]["tools"]} == {"plan", "record_steps"}
    solved = responses[3]["result"]
    assert solved["isError"] is False
    assert json.loads(solved["content"][0]["text"])["status"] == "solved"
    broken = responses[4]["result"]
    assert broken["isError"] is True and "PDDLSyntaxError" in broken["content"][0]["text"]
    assert responses[5]["error"]["code"] == -32601
