"""What serves the engine to other processes: the HTTP service (`http`, FastAPI + uvicorn) and the MCP server
(`mcp_server`, the official SDK), both over one `service.Service`: a pool of warm planner worker processes
(`pool`, `worker`), the trace store, replanning runs and background jobs. `models` holds the wire models,
`verdict` the validator as a critic, `metrics` the Prometheus metrics.

The engine (cascade, planner, delegates, workers, SAS) does not import from here.
"""
