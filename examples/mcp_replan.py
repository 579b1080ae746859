"""An MCP client that plans with `portfolio mcp`, executes the steps itself, reports them, and replans around a
failing tool. Any MCP-capable runtime (Claude Desktop, an IDE agent, the OpenAI Agents SDK's MCP support) makes
the same calls.

    python examples/mcp_replan.py

The server is started over stdio through the official MCP client session. The tools (`travel.py`) are
compiled to PDDL (`compile_actions`) and sent with each `plan` call, together with the state reached (`init`),
the steps that failed (`excluded`) and why (`critiques`); every executed step is reported with `record_steps`
(the server's trace store: later plans learn from it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from travel import TOOLS, Booking, Trip

from portfolio.agent.adapters.session import Session

ROOT = Path(__file__).resolve().parent.parent


async def call(client: ClientSession, tool: str, arguments: dict) -> dict:
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    if result.is_error:
        raise RuntimeError(f"{tool}: {text}")
    return json.loads(text)


async def main(traces: str | None = None) -> dict:
    folder = tempfile.TemporaryDirectory()
    traces = traces or str(Path(folder.name) / "traces.db")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "portfolio.cli", "mcp", "--traces", traces], env=env
    )
    session = Session(TOOLS, goal=Booking)  # executes the tools locally; planning happens in the server
    board = session.start(Trip("Oslo", "Rome"))
    log: dict = {"plans": [], "steps": []}
    try:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            log["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            while not session.done(board):
                task = session.task(board)
                answer = await call(
                    client,
                    "plan",
                    {
                        "domain": task.domain_pddl,
                        "problem": task.problem_pddl,
                        "init": sorted(str(a) for a in board.facts),
                        "excluded": list(board.excluded),
                        "critiques": list(board.critiques),
                    },
                )
                if answer["status"] != "solved":
                    raise RuntimeError(f"no plan: {answer['status']}")
                log["plans"].append(answer["plan"])
                print(f"plan   {' '.join(answer['plan'])} (by {answer['delegate']})")
                for step in answer["plan"]:
                    board, report = await session.execute(board, step)
                    log["steps"].append(report)
                    print(f"step   {report.action:14} {report.outcome:8} {report.error or ''}".rstrip())
                    recorded = await call(
                        client,
                        "record_steps",
                        {
                            "steps": [
                                {
                                    "run_id": "mcp-example",
                                    "step": len(log["steps"]) - 1,
                                    "action": report.action,
                                    "outcome": report.outcome,
                                    "error": report.error,
                                    "failure_category": report.category,
                                    "duration_ms": report.ms,
                                }
                            ]
                        },
                    )
                    assert recorded["recorded"] == 1, recorded
                    if report.outcome != "success":
                        break  # replan from the state reached, without the failed step
    finally:
        session.close()
        folder.cleanup()
    log["booking"] = board.objects.get("booking")
    print(f"booked {log['booking']}")
    return log


if __name__ == "__main__":
    asyncio.run(main())
