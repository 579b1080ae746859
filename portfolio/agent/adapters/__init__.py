"""Adapters that plug the planner into other agent runtimes, one module per runtime, each importing its library
lazily (install the `agents` extra): `langgraph` (a planner node that picks the next step from the graph state),
`pydantic_ai` (the planner as a function tool). An MCP-capable runtime needs no adapter: it talks to
`portfolio mcp` (see `examples/mcp_replan.py`).
"""
