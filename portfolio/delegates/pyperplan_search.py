"""pyperplan's search, run inside a worker process (`portfolio.engine.worker_main`): the child side of the
`pyperplan` delegate (`portfolio.delegates.pyperplan`). It imports pyperplan only, so the worker stays small."""

from __future__ import annotations

from typing import Any

SEARCH_OP = "portfolio.delegates.pyperplan_search:solve"
PRELOAD = ("pyperplan.planner", "portfolio.delegates.pyperplan_search")


def solve(domain_pddl: str, problem_pddl: str, excluded: tuple[str, ...] = ()) -> dict[str, Any]:
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
