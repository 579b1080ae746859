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
    from domains.errors import TaskInputError as TaskInputError
    from domains.literals import parse_state as parse_state
    from domains.load import load_task as load_task
    from domains.model import Atom as Atom
    from domains.model import GroundAction as GroundAction
    from domains.model import Task as Task
    from domains.typed_actions import ReplanRequested as ReplanRequested
    from domains.typed_actions import action as action
    from domains.typed_actions import replan_when as replan_when
    from learning.costs import ActionCost as ActionCost
    from learning.model import Evidence as Evidence
    from learning.retrain import retrain as retrain
    from portfolio.agent.runtime import Agent as Agent
    from portfolio.cost_explain import CostExplanation as CostExplanation
    from portfolio.delegates.fast_downward.delegate import FastDownward as FastDownward
    from portfolio.delegates.pyperplan import Pyperplan as Pyperplan
    from portfolio.delegates.registry import build_stages as build_stages
    from portfolio.engine.cascade import PortfolioDecomposition as PortfolioDecomposition
    from portfolio.engine.results import Attempt as Attempt
    from portfolio.engine.results import Delegate as Delegate
    from portfolio.engine.results import DelegateOutcome as DelegateOutcome
    from portfolio.engine.results import PlanRequest as PlanRequest
    from portfolio.engine.results import PlanResult as PlanResult
    from portfolio.engine.results import Status as Status
    from portfolio.engine.tiers import Tier as Tier
    from portfolio.planner import Planner as Planner
    from traces.records import StepRecord as StepRecord
    from traces.store import TraceStore as TraceStore

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
    "ActionCost": "learning.costs",
    "Evidence": "learning.model",
    "PlanResult": "portfolio.engine.results",
    "PlanRequest": "portfolio.engine.results",
    "Attempt": "portfolio.engine.results",
    "Status": "portfolio.engine.results",
    "Delegate": "portfolio.engine.results",
    "DelegateOutcome": "portfolio.engine.results",
    "PortfolioDecomposition": "portfolio.engine.cascade",
    "Tier": "portfolio.engine.tiers",
    "FastDownward": "portfolio.delegates.fast_downward.delegate",
    "Pyperplan": "portfolio.delegates.pyperplan",
    "build_stages": "portfolio.delegates.registry",
    "CostExplanation": "portfolio.cost_explain",
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
