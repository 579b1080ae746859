"""portfolio-planner: validated plans from a hard-budgeted cascade of planners, for agent runtimes.

Everything a user needs is importable from here:

    from portfolio import Planner, load_task

    with Planner() as planner:
        result = planner.plan(load_task("domain.pddl", "problem.pddl"))
        print(result.status, result.plan)

    from portfolio import Agent, action, TraceStore, StepRecord, retrain   # agents; traces; learned costs

Names resolve on first use (`__getattr__`), so `import portfolio` stays cheap for the CLI's cold start; the
`TYPE_CHECKING` imports below give IDEs and type checkers the same names with their real types. Where each lives:
the engine (`portfolio.engine`: the cascade and its vocabulary), the delegates (`portfolio.delegates`), the
Planner (`portfolio.planner`), agents (`portfolio.agent`), tasks and states (`domains`), traces (`traces`) and
the failure models (`learning`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from domains.errors import TaskInputError
    from domains.literals import parse_state
    from domains.load import load_task
    from domains.model import Atom, GroundAction, Task
    from domains.typed_actions import ReplanRequested, action, replan_when
    from learning.retrain import retrain
    from portfolio.agent.runtime import Agent
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.delegates.pyperplan import Pyperplan
    from portfolio.engine.cascade import PortfolioDecomposition, Tier
    from portfolio.engine.results import Attempt, Delegate, DelegateOutcome, PlanRequest, PlanResult, Status
    from portfolio.planner import Planner
    from traces.records import StepRecord
    from traces.store import TraceStore

# name -> the module that defines it
_HOMES = {
    "Planner": "portfolio.planner",
    "Agent": "portfolio.agent.runtime",
    "action": "domains.typed_actions",
    "replan_when": "domains.typed_actions",
    "ReplanRequested": "domains.typed_actions",
    "load_task": "domains.load",
    "parse_state": "domains.literals",
    "Atom": "domains.model",
    "GroundAction": "domains.model",
    "Task": "domains.model",
    "TaskInputError": "domains.errors",
    "TraceStore": "traces.store",
    "StepRecord": "traces.records",
    "retrain": "learning.retrain",
    "PlanResult": "portfolio.engine.results",
    "PlanRequest": "portfolio.engine.results",
    "Attempt": "portfolio.engine.results",
    "Status": "portfolio.engine.results",
    "Delegate": "portfolio.engine.results",
    "DelegateOutcome": "portfolio.engine.results",
    "PortfolioDecomposition": "portfolio.engine.cascade",
    "Tier": "portfolio.engine.cascade",
    "FastDownward": "portfolio.delegates.fast_downward.delegate",
    "Pyperplan": "portfolio.delegates.pyperplan",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'portfolio' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
