"""The agent API built on the engine: typed actions executed, observed and replanned.

- `runtime`: `Agent` (`run` and `await arun`), the executors for typed Python actions and for PDDL handlers;
- `loop`: the execute-observe-replan loop with a sync and an async driver; its decisions (triggers, hints, veto,
  critiques) are `loop_run`, what it asks its drivers to do `loop_requests`, what it takes and reports (config,
  executor protocol, step records) `loop_types`;
- `failures`: failure classes, the persist / refine / concede decision, critiques;
- `reflection`: pre- and post-step critics through the OpenAI-compatible LLM client;
- `observability`: structured events, OpenTelemetry spans, counters;
- `adapters`: the planner inside LangGraph graphs and pydantic-ai agents (extra `agents`).

    from portfolio.agent import Agent, action
"""

from domains.typed_actions import ReplanRequested, action, replan_when
from portfolio.agent.runtime import Agent

__all__ = ["Agent", "ReplanRequested", "action", "replan_when"]
