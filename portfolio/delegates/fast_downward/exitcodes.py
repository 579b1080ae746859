"""Fast Downward's exit codes by name, and what a set of searches that ran side by side amounts to.

The codes are those of Fast Downward's `driver/returncodes.py` (documented at fast-downward.org, "exit codes").
`aggregate` plays the part of the driver's `generate_portfolio_exitcode`, with one difference that matters for a
cascade: a search still running when the deadline came (killed, code None) or one that ran out of memory says
that more resources might help, which is worth more to the caller than another search's crash, so resource
limits and "exhausted without a proof" rank before unrecoverable errors (the driver ranks unrecoverable errors
first, because a crash in an offline portfolio is a bug to report).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from portfolio.engine.results import Status

SUCCESS = 0
SEARCH_PLAN_FOUND_AND_OUT_OF_MEMORY = 1
SEARCH_PLAN_FOUND_AND_OUT_OF_TIME = 2
SEARCH_PLAN_FOUND_AND_OUT_OF_MEMORY_AND_TIME = 3
TRANSLATE_UNSOLVABLE = 10
SEARCH_UNSOLVABLE = 11  # a complete search (or a safe dead-end test on the initial state) proved it
SEARCH_UNSOLVED_INCOMPLETE = 12  # the search space of an incomplete search ran out: no verdict
SEARCH_UNSOLVABLE_WITHIN_BOUND = 13
TRANSLATE_OUT_OF_MEMORY = 20
TRANSLATE_OUT_OF_TIME = 21
SEARCH_OUT_OF_MEMORY = 22
SEARCH_OUT_OF_TIME = 23
SEARCH_OUT_OF_MEMORY_AND_TIME = 24
TRANSLATE_CRITICAL_ERROR = 30
TRANSLATE_INPUT_ERROR = 31
SEARCH_CRITICAL_ERROR = 32
SEARCH_INPUT_ERROR = 33
SEARCH_UNSUPPORTED = 34
DRIVER_CRITICAL_ERROR = 35
DRIVER_INPUT_ERROR = 36
DRIVER_UNSUPPORTED = 37

PLAN_FOUND = frozenset(
    {
        SUCCESS,
        SEARCH_PLAN_FOUND_AND_OUT_OF_MEMORY,
        SEARCH_PLAN_FOUND_AND_OUT_OF_TIME,
        SEARCH_PLAN_FOUND_AND_OUT_OF_MEMORY_AND_TIME,
    }
)
PROVEN_UNSOLVABLE = frozenset({TRANSLATE_UNSOLVABLE, SEARCH_UNSOLVABLE})
OUT_OF_MEMORY = frozenset({TRANSLATE_OUT_OF_MEMORY, SEARCH_OUT_OF_MEMORY, SEARCH_OUT_OF_MEMORY_AND_TIME})
OUT_OF_TIME = frozenset({TRANSLATE_OUT_OF_TIME, SEARCH_OUT_OF_TIME})
UNSUPPORTED = frozenset({SEARCH_UNSUPPORTED, DRIVER_UNSUPPORTED})

_MEANING = {
    SUCCESS: "plan found",
    TRANSLATE_UNSOLVABLE: "translator proved the task unsolvable",
    SEARCH_UNSOLVABLE: "search proved the task unsolvable",
    SEARCH_UNSOLVED_INCOMPLETE: "search space exhausted by an incomplete search",
    SEARCH_UNSOLVABLE_WITHIN_BOUND: "no plan within the cost bound",
    SEARCH_OUT_OF_MEMORY: "search ran out of memory",
    SEARCH_OUT_OF_TIME: "search ran out of time",
    SEARCH_CRITICAL_ERROR: "search critical error",
    SEARCH_INPUT_ERROR: "search input error",
    SEARCH_UNSUPPORTED: "configuration not supported for this task",
}


def meaning(code: int | None) -> str:
    """What an exit code says, for attempt reasons (None: still running when the deadline came)."""
    if code is None:
        return "killed at the deadline"
    if code < 0:
        return f"killed by signal {-code}"
    return _MEANING.get(code, f"exit code {code}")


def status_of(code: int | None) -> Status:
    """One search's exit code (None: killed at the deadline) as an outcome status."""
    if code is None or code in OUT_OF_TIME:
        return Status.TIMEOUT
    if code in PLAN_FOUND:
        return Status.SOLVED
    if code in PROVEN_UNSOLVABLE:
        return Status.UNSOLVABLE
    if code == SEARCH_UNSOLVED_INCOMPLETE or code == SEARCH_UNSOLVABLE_WITHIN_BOUND:
        return Status.INCOMPLETE
    if code in OUT_OF_MEMORY:
        return Status.MEMOUT
    if code in UNSUPPORTED:
        return Status.UNSUPPORTED
    return Status.ERROR


# Best first: a plan, a proof, then what more time or memory might change, then "nothing found".
_RANK = (Status.SOLVED, Status.UNSOLVABLE, Status.TIMEOUT, Status.MEMOUT, Status.INCOMPLETE)


@dataclass(frozen=True)
class Verdict:
    status: Status
    search: str | None  # the search whose code decided it (its plan, for SOLVED)


def aggregate(codes: Mapping[str, int | None]) -> Verdict:
    """The outcome of the searches that ran (search name -> exit code, None when killed at the deadline),
    in preference order (the last search's plan wins over an earlier one's):

    a plan -> SOLVED; else a proof -> UNSOLVABLE; else TIMEOUT, MEMOUT, INCOMPLETE, the first present; else the
    unrecoverable failures: one kind -> that kind (UNSUPPORTED or ERROR), several -> ERROR.
    """
    if not codes:
        return Verdict(Status.TIMEOUT, None)
    statuses = {name: status_of(code) for name, code in codes.items()}
    for wanted in _RANK:
        found = [name for name, status in statuses.items() if status is wanted]
        if found:
            return Verdict(wanted, found[-1] if wanted is Status.SOLVED else found[0])
    kinds = set(statuses.values())
    return Verdict(kinds.pop() if len(kinds) == 1 else Status.ERROR, next(iter(statuses)))
