"""What serves the engine to other processes: the HTTP/JSON service (`http`) and the MCP server (`mcp_server`).

The engine (cascade, planner, delegates, workers, SAS) does not import from here.
"""
