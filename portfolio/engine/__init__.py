"""The engine: what every delegate and every front end stands on, and nothing built on top of it.

    results.py      the vocabulary: PlanRequest, PlanResult, Attempt, Status, DelegateOutcome, Resource
    wire_model.py   pydantic's model methods for the results (dataclasses), pydantic imported on first use
    arguments.py    checking what callers hand in (tasks, states, actions given as text)
    cascade.py      PortfolioDecomposition: tiers of delegates tried in order under hard wall-clock budgets
    carry.py        a delegate's work carried over past its share, answered when the caller still waits
    cancel.py       cancellation handed down to delegates and their processes
    limits.py       memory and CPU limits, process groups, children that die with their parent
    workers.py      long-lived worker processes (translation, pyperplan, validation) with hard deadlines
    search_pool.py  pre-started Fast Downward search processes, waiting on several at once
    worker_main.py  the child side of a worker process (`python -m portfolio.engine.worker_main`)

Imports point one way: the engine uses `domains` (and `traces`, `learning` nowhere); delegates, the Planner,
the service, the agents, the commands and the benchmarks use the engine, never the reverse
(`tests/test_layering.py`).
"""
