"""Failure taxonomy, meta-reasoning and critiques for the execution loop.

Every failed step is classified as one of
- `transient`: the world may behave differently if asked again (timeouts, dropped connections, rate limits);
- `knowledge`: information was missing or wrong (a lookup found nothing, input did not parse);
- `infeasible`: the action cannot succeed here, whatever is tried (no permission, not implemented);
and whether it left side effects behind. The decision follows the peers' meta-reasoning (CaseHub): *persist*
(retry a transient failure with backoff, unless it left side effects, since a retry would repeat them),
*refine* (replan without the failed grounded action) or *concede* (infeasible, or too many adaptations).

Actions raise the exception classes below to say what happened, or any exception: builtin types are mapped
(TimeoutError -> transient, LookupError -> knowledge, PermissionError -> infeasible, ...); the rest counts as
knowledge, so the agent tries another way before giving up. Each failure carries a verbal critique: the reason,
or what a configured critic (an LLM) says about it. Critiques go to the next planning call and the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class Category(str, Enum):
    TRANSIENT = "transient"
    KNOWLEDGE = "knowledge"
    INFEASIBLE = "infeasible"


class Decision(str, Enum):
    PERSIST = "persist"
    REFINE = "refine"
    CONCEDE = "concede"


class ActionFailure(Exception):
    """Base of the failures an action may raise to classify itself; `side_effects=True` when it changed the
    world before failing."""

    category = Category.KNOWLEDGE

    def __init__(self, message: str = "", *, side_effects: bool = False) -> None:
        super().__init__(message)
        self.side_effects = side_effects


class TransientFailure(ActionFailure):
    category = Category.TRANSIENT


class KnowledgeFailure(ActionFailure):
    category = Category.KNOWLEDGE


class InfeasibleFailure(ActionFailure):
    category = Category.INFEASIBLE


_TRANSIENT = (TimeoutError, ConnectionError, InterruptedError, BlockingIOError)
_INFEASIBLE = (PermissionError, NotImplementedError, FileNotFoundError)
_KNOWLEDGE = (LookupError, ValueError)


@dataclass(frozen=True)
class Failure:
    """One classified failure of one grounded action."""

    action: str  # PDDL form, e.g. "(fetch-news)"
    category: Category
    side_effects: bool
    error: str  # "TimeoutError: upstream did not answer"
    critique: str = ""
    decision: Decision | None = None  # what the loop does about it (set before the critique is asked for)
    retry: int = 0  # retries of this step before this failure


def classify(error: BaseException) -> tuple[Category, bool]:
    """(category, left side effects) of an exception raised by an action."""
    side_effects = bool(getattr(error, "side_effects", False))
    if isinstance(error, ActionFailure):
        return error.category, side_effects
    category = getattr(error, "category", None)
    if isinstance(category, str) and category in {c.value for c in Category}:
        return Category(category), side_effects
    if isinstance(error, _INFEASIBLE):  # before OSError-based transient types: PermissionError is an OSError
        return Category.INFEASIBLE, side_effects
    if isinstance(error, _TRANSIENT):
        return Category.TRANSIENT, side_effects
    if isinstance(error, _KNOWLEDGE):
        return Category.KNOWLEDGE, side_effects
    return Category.KNOWLEDGE, side_effects


def describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def decide(failure: Failure, retries_done: int, max_retries: int, adaptations: int, max_adaptations: int) -> Decision:
    """Persist, refine or concede on `failure`, given retries of this step and adaptations of this run so far."""
    if failure.category is Category.INFEASIBLE:
        return Decision.CONCEDE
    if failure.category is Category.TRANSIENT and not failure.side_effects and retries_done < max_retries:
        return Decision.PERSIST
    if adaptations >= max_adaptations:
        return Decision.CONCEDE
    return Decision.REFINE


def backoff_s(retry: int, base_s: float, cap_s: float = 2.0) -> float:
    """Delay before retry number `retry` (0-based): doubling from `base_s`, capped."""
    return min(base_s * (2**retry), cap_s)


Critic = Callable[[Failure], str]


def default_critique(failure: Failure) -> str:
    """The reason in words a planner (or an LLM) can act on, agreeing with the loop's decision: a transient
    failure that is retried says so, and only one that is planned around says to prefer another way."""
    advice = {
        Category.TRANSIENT: "it may work later, but prefer another way now",
        Category.KNOWLEDGE: "it lacked information; find it another way",
        Category.INFEASIBLE: "it cannot succeed here",
    }[failure.category]
    if failure.decision is Decision.PERSIST:
        advice = f"it may work if asked again: retrying it (retry {failure.retry + 1})"
    elif failure.decision is Decision.CONCEDE and failure.category is not Category.INFEASIBLE:
        advice = f"{advice.split(';')[0].split(', but')[0]}; giving up: no adaptations left"
    effects = " It left side effects behind." if failure.side_effects else ""
    return f"{failure.action} failed ({failure.category.value}): {failure.error}; {advice}.{effects}"


def critique(failure: Failure, critic: Critic | None = None) -> str:
    """The critic's critique when one is configured and answers, else the default one."""
    if critic is not None:
        try:
            text = critic(failure)
        except Exception as error:
            return default_critique(failure) + f" (critic failed: {describe(error)})"
        if text and text.strip():
            return text.strip()
    return default_critique(failure)


__all__ = [
    "ActionFailure",
    "Category",
    "Critic",
    "Decision",
    "Failure",
    "InfeasibleFailure",
    "KnowledgeFailure",
    "TransientFailure",
    "backoff_s",
    "classify",
    "critique",
    "decide",
    "default_critique",
    "describe",
]
