"""What an attempt's `details` may hold: one typed schema for the delegates that write it, the trace store that
keeps it (inside `plans.attempts`, JSON), the selection learner (`learning.selection`) and the benchmarks that
read it back.

Every key is optional (a delegate writes the ones that apply to what it did) and is declared here with its type,
its meaning and who writes it. The types are TypedDicts, so the details stay plain dicts: the JSON written is the
same as before there was a schema, and old stores read back as they are (nothing is validated, dropped or
coerced on the way in or out). `problems` checks a details dict against the schema at run time: the tests run
real plans through it, so a writer that adds a key without declaring it here fails them.

It lives in `traces`, which every other package may import (`learning` and `traces` never import `portfolio`).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any, Literal, TypedDict, Union, cast, get_args, get_origin, get_type_hints, is_typeddict


class SasSize(TypedDict):
    """The size of Fast Downward's translation (SAS+ task) of the task."""

    variables: int
    operators: int


class InProcessSearch(TypedDict, total=False):
    """Fast Downward's in-process search of a small task (`portfolio.delegates.fast_downward.inprocess`)."""

    status: str  # a `Status` value ("solved", "timeout", "memout", ...), or "unsupported" (see `reason`)
    reason: str  # with "unsupported": why the task could not be searched in process ("axioms")
    expanded: int  # states expanded
    ms: float  # how long it searched


class FoundPlan(TypedDict):
    """One plan a cost-aware Fast Downward search found, in the order they were found."""

    search: str  # the configuration (alias) that found it, or "in-process-astar"
    cost: float  # its cost, in the task's own units
    ms: float  # when it was found, after the searches started


class AgendaStep(TypedDict, total=False):
    """One subgoal the decomposer planned (`portfolio.delegates.decompose`), as the goal agenda records it."""

    status: str  # a `Status` value
    ms: float  # time spent on the subgoal
    via: str  # which delegate planned it (the `via` of its outcome)
    steps: int  # the sub-plan's length
    reason: str  # when it was not solved: why


class AttemptDetails(TypedDict, total=False):
    """The `details` of one delegate's attempt (`portfolio.engine.results.Attempt`, `DelegateOutcome`). Grouped by
    who writes them; "fast-downward" is `portfolio.delegates.fast_downward`."""

    # -- fast-downward: translation (the goal agenda writes `translate_ms` and `translation` too)
    translate_ms: float  # how long getting the SAS task took (a cache hit: almost nothing)
    translation: str  # fast-downward: where the SAS task came from, "translated", "memory" or "disk" (the cache);
    # goal-agenda: why it has no translation to share (the translator failed or ran out of time)
    translation_reused: bool  # a cached translation was re-used with the initial state rewritten (a replan)
    translator: list[str]  # the translator flags it was made with (empty: the driver's defaults)
    translated_by: str  # which interpreter ran the translator ("cpython", "pypy3"), in rows recorded with the
    # PyPy translator race (docs/decisions/pypy-translator.md); nothing writes it, stored rows still check
    sas: SasSize  # the SAS task's size: what configuration selection weighs recorded tasks by
    # -- fast-downward: search
    in_process: InProcessSearch  # the in-process search tried first on small tasks, and how it ended
    search: str  # the configuration whose plan (or proof of unsolvability) was taken: an alias of
    # `searches.SEARCH_ALIASES`, "custom" (a raw search string), "in-process" or "in-process-astar"
    searches: dict[str, str]  # every configuration that ran -> how it ended ("plan found", "stopped: ...", an
    # exit code's meaning): what configuration selection learns from
    selection: str  # with a learned selection model: "learned" (its order raced) or "fixed" (no entry for the domain)
    costs: bool  # the cost-aware searches ran (the task has costs): no evidence for configuration selection
    quality: str  # with costs: the plan quality asked for, "anytime", "optimal" or "first"
    plans: list[FoundPlan]  # with costs: every plan found
    optimal: bool  # with costs: the plan taken was proved optimal
    # -- typed-search
    expanded: int  # states expanded by the search
    # -- llm
    llm_calls: int  # chat requests made
    prompt_tokens: int  # tokens, as the endpoint counted them, summed over the calls
    completion_tokens: int
    total_tokens: int
    repair_rounds: int  # requests that carried a critique of the previous answer
    critiques: list[str]  # why each rejected answer was rejected ("<mode> round <n>: <critique>")
    mode: str  # the mode whose answer was taken: "plan" or "subgoals"
    llm_error: str  # the endpoint's failure that ended the attempt (`LLMError.kind`: "timeout", "rate-limited", ...)
    # -- goal-agenda
    agenda: list[str]  # each agenda entry's new goal atoms, in order (the last entry is the whole goal)
    agenda_steps: list[AgendaStep]  # how each entry was planned
    agenda_failure: str  # the critique of the entry that failed
    method: str  # what gave the answer: "agenda", "full goal", or "agenda only (...)"
    # -- the decomposer's subgoal outcomes (never an attempt's: they end up in `agenda_steps`)
    via: str  # the delegate that planned the subgoal, or "already true"
    # -- the cascade (`portfolio.engine.cascade`, "Carry-over")
    carried_over: bool  # no answer within its share: its work went on in the background
    background: bool  # the record of how that background work ended
    stopped_by: str  # the delegate whose answer stopped this one
    # -- plan reuse (`portfolio.plan_reuse`)
    offset: int  # the previous plan's steps already executed (the kept suffix starts there)
    previous_length: int  # the previous plan's length


class StoredAttempt(TypedDict, total=False):
    """An attempt as the trace store keeps it (`plans.attempts`: `Attempt.model_dump(mode="json")`)."""

    delegate: str
    status: str  # a `Status` value
    elapsed_ms: float
    reason: str
    details: AttemptDetails


DETAIL_KEYS: frozenset[str] = frozenset(AttemptDetails.__annotations__)


def details_of(attempt: Mapping[str, Any]) -> AttemptDetails:
    """The details of a stored attempt (a JSON object read back); empty when it has none."""
    details = attempt.get("details")
    return cast(AttemptDetails, details) if isinstance(details, dict) else AttemptDetails()


def problems(details: Mapping[str, Any]) -> list[str]:
    """Where `details` departs from the schema: keys it does not declare, values of another type (an int passes
    for a float, as in JSON). Empty when it conforms."""
    return _check(details, AttemptDetails, "details")


def _check(value: Any, expected: Any, where: str) -> list[str]:
    if expected is Any:
        return []
    if is_typeddict(expected):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        hints = get_type_hints(expected)
        found = [f"{where}: undeclared key {key!r}" for key in value if key not in hints]
        found += [f"{where}: missing key {key!r}" for key in expected.__required_keys__ if key not in value]
        for key, item in value.items():
            if key in hints:
                found += _check(item, hints[key], f"{where}[{key!r}]")
        return found
    origin = get_origin(expected)
    if origin in (Union, types.UnionType):
        options = [_check(value, option, where) for option in get_args(expected)]
        return [] if any(not found for found in options) else options[0]
    if origin is Literal:
        return [] if value in get_args(expected) else [f"{where}: {value!r} is none of {get_args(expected)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {value!r}"]
        (item_type,) = get_args(expected)
        return [problem for i, item in enumerate(value) for problem in _check(item, item_type, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        key_type, item_type = get_args(expected)
        found = []
        for key, item in value.items():
            found += _check(key, key_type, f"{where} key")
            found += _check(item, item_type, f"{where}[{key!r}]")
        return found
    accepted: tuple[type, ...] = (int, float) if expected is float else (expected,)
    if isinstance(value, bool) and expected is not bool:  # True is an int to Python, never to the schema
        return [f"{where}: expected {expected.__name__}, got {value!r}"]
    return [] if isinstance(value, accepted) else [f"{where}: expected {expected.__name__}, got {value!r}"]
