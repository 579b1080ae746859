"""The child side of a planner worker process: `python -m portfolio.engine.worker_main`.

Python threads cannot be stopped, so everything that runs Python planning code under a budget (Fast Downward's
translator, pyperplan's search) runs here, in a process the parent can kill. The worker imports its planners
once and then serves requests, so a warm worker pays no start-up per call.

Protocol: length-prefixed pickles on the original stdout/stdin file descriptors. File descriptor 1 is pointed
at stderr before anything else runs, because the translator and pyperplan print freely.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import traceback
from typing import Any, BinaryIO

HEADER = struct.Struct("!Q")


def read_message(stream: BinaryIO) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError("worker channel closed")
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError("worker channel closed mid-message")
    return pickle.loads(payload)


def write_message(stream: BinaryIO, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def translate(domain_pddl: str, problem_pddl: str, options: tuple[str, ...] = ()) -> dict[str, Any]:
    """Fast Downward's translate pipeline (see `portfolio.delegates.fast_downward.translate`) with the translator's `options`: SAS text
    and whether the translator proved the task unsolvable."""
    from portfolio.delegates.fast_downward.translate import translate as run_translator

    return run_translator(domain_pddl, problem_pddl, options).as_dict()


def pyperplan_solve(domain_pddl: str, problem_pddl: str, excluded: tuple[str, ...] = ()) -> dict[str, Any]:
    """pyperplan's greedy best-first search with hFF and helpful-action pruning, through its public parser and
    grounder (no temporary files). Operators named in `excluded` (PDDL form, lower case) are removed first.
    Returns the plan as PDDL strings, or `plan: None` when the search space was exhausted. Helpful-action
    pruning makes the search incomplete, so an exhausted space says nothing about the task: the delegate
    reports `incomplete`, never `unsolvable`."""
    from pyperplan.grounding import ground
    from pyperplan.heuristics.relaxation import hFFHeuristic
    from pyperplan.pddl.parser import Parser
    from pyperplan.search import greedy_best_first_search

    parser = Parser(None)
    parser.domInput, parser.probInput = domain_pddl, problem_pddl
    problem = parser.parse_problem(parser.parse_domain(read_from_file=False), read_from_file=False)
    task = ground(problem)
    if excluded:
        banned = set(excluded)
        task.operators = [op for op in task.operators if op.name not in banned]
    solution = greedy_best_first_search(task, hFFHeuristic(task), use_relaxed_plan=True)
    if solution is None:
        return {"plan": None}
    return {"plan": [op.name for op in solution]}


HANDLERS = {"translate": translate, "pyperplan": pyperplan_solve, "ping": lambda: {"pong": True}}


def serve(requests: BinaryIO, responses: BinaryIO, handlers: dict | None = None) -> None:
    """Answer requests until the input ends; `handlers` (op -> function) default to the planner ops above."""
    handlers = HANDLERS if handlers is None else handlers
    while True:
        try:
            op, kwargs = read_message(requests)
        except EOFError:
            return
        try:
            result = {"ok": True, "value": handlers[op](**kwargs)}
        except MemoryError:  # over the memory cap: no traceback, it would need memory the frames still hold
            result = {"ok": False, "error": "MemoryError: out of memory"}
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the parent as data
            result = {
                "ok": False,
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(limit=8),
            }
        write_message(responses, result)


def main() -> None:
    from portfolio.engine.limits import die_with_parent_if_asked

    die_with_parent_if_asked()
    responses = os.fdopen(os.dup(1), "wb")
    requests = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)  # stray prints from planners go to stderr, never into the message channel
    sys.stdout = sys.stderr
    preload = sys.argv[1:]
    if "translate" in preload:
        import fast_downward.translate.main  # noqa: F401 - warm the import before the first request
        import fast_downward.translate.normalize  # noqa: F401
        import portfolio.delegates.fast_downward.translate  # noqa: F401
    if "pyperplan" in preload:
        import pyperplan.planner  # noqa: F401
    serve(requests, responses)


if __name__ == "__main__":
    main()
