"""Read a unified-planning `Problem` built in Python into the task model; validate plans with UP as a second,
independent validator (`up_validate`, off the planning path).

The problem goes through UP's own PDDL writer and then `domains.pddl`, so one parser decides what a task means.
unified-planning is imported inside the function only: importing it costs ~2.5 s, and nothing in `domains` may
pay that at import time.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from domains.errors import TaskInputError
from domains.model import Plan, Task
from domains.pddl import parse_task
from domains.pddl_writer import domain_to_pddl, problem_to_pddl, task_with_texts

_PDDL_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
# Words that would change the meaning of the text; UP also avoids harmless ones ("goal", "action", "domain")
# that Fast Downward and `domains.pddl` read fine as names.
_RESERVED = frozenset(
    {
        "and",
        "or",
        "not",
        "imply",
        "exists",
        "forall",
        "when",
        "increase",
        "decrease",
        "assign",
        "scale-up",
        "scale-down",
        "either",
        "define",
        "object",
        "number",
        "total-cost",
    }
)


def task_from_up(problem: Any) -> Task:
    """Convert a `unified_planning.model.Problem` into a `Task`.

    UP renames items whose names are not valid PDDL or clash; names it renamed are mapped back when the
    original (lower-cased) is a valid PDDL name that no other item uses, so plans speak the user's names. When
    nothing was renamed the task keeps UP's texts; otherwise the texts come from the writer.
    """
    return read_up_problem(problem).task


@dataclasses.dataclass(frozen=True)
class UpTask:
    """A UP problem read into a `Task`, with the way back: `items` maps each name the task uses for an action,
    object, type, predicate or function (lower-case, as in plans) to the UP item it stands for, so a plan's
    steps become the problem's own `Action`s and `Object`s."""

    task: Task
    items: dict[str, Any]


def read_up_problem(problem: Any) -> UpTask:
    """`task_from_up`, keeping the name of every item in the task beside the UP item (`UpTask.items`).

    `TaskInputError` when UP cannot write the problem as PDDL, `UnsupportedFeatureError` (a `TaskInputError`)
    for features the task model does not have (numeric fluents beyond action costs, durative actions)."""
    from unified_planning.io import PDDLWriter  # lazy: ~2.5 s import

    writer = PDDLWriter(problem)
    try:
        domain_text, problem_text = writer.get_domain(), writer.get_problem()
    except Exception as error:  # UP raises its own exception types for problems PDDL cannot express
        raise TaskInputError(f"unified-planning cannot write this problem as PDDL: {error}") from None
    task = parse_task(domain_text, problem_text, "<unified-planning domain>", "<unified-planning problem>")
    mapping = _renamings(writer.nto_renamings)
    items = {mapping.get(new.lower(), new.lower()): item for new, item in writer.nto_renamings.items()}
    if not mapping:
        return UpTask(task, items)
    return UpTask(task_with_texts(_rename(task.domain, mapping), _rename(task.problem, mapping)), items)


def _renamings(new_to_old: dict[str, Any]) -> dict[str, str]:
    used = {name.lower() for name in new_to_old} | _RESERVED
    mapping: dict[str, str] = {}
    for new, item in new_to_old.items():
        new, old = new.lower(), str(getattr(item, "name", new)).lower()
        if new.startswith("?") or old == new or not _PDDL_NAME.match(old) or old in used:
            continue
        if old in mapping.values():
            continue
        mapping[new] = old
    return mapping


def _rename(value: Any, mapping: dict[str, str]) -> Any:
    """Apply `mapping` to every name inside a model value (dataclasses, tuples, frozensets, strings)."""
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, tuple):
        return tuple(_rename(v, mapping) for v in value)
    if isinstance(value, frozenset):
        return frozenset(_rename(v, mapping) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _rename(getattr(value, f.name), mapping) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


@dataclasses.dataclass(frozen=True)
class UpVerdict:
    valid: bool | None  # None: UP cannot read or validate this task
    message: str
    cost: float | None = None  # the plan's total-cost as UP evaluates the task's metric, when it has one


def up_validate(task: Task, plan: Plan) -> UpVerdict:
    """unified-planning's `SequentialPlanValidator` on `plan`: an independent second opinion on the project's
    own validator, for differential tests and benchmarks only (importing UP costs ~2.5 s, reading a task up to
    0.7 s). Returns (valid, UP's message); valid is None when UP cannot read or validate the task at all (it
    has no derived predicates; it rejects a repeated variable in a predicate declaration, so the writer's
    text, which renames it, is tried after the user's); cost is the metric's value when the task has one."""
    from unified_planning.engines.plan_validator import SequentialPlanValidator
    from unified_planning.engines.results import ValidationResultStatus
    from unified_planning.plans import ActionInstance, SequentialPlan

    problem, why = _up_problem(task)
    if problem is None:
        return UpVerdict(None, f"unified-planning cannot read the task: {why}")
    actions = {a.name.lower(): a for a in problem.actions}
    objects = {o.name.lower(): o for o in problem.all_objects}
    try:
        steps = [ActionInstance(actions[s.name], tuple(objects[a] for a in s.args)) for s in plan]
        validator = SequentialPlanValidator()
        # UP's kind check refuses static cost fluents (elevators, transport); its simulator evaluates them fine.
        validator.skip_checks = True
        result = validator.validate(problem, SequentialPlan(steps))
    except Exception as error:
        return UpVerdict(None, f"unified-planning cannot validate the plan: {type(error).__name__}: {error}")
    messages = "; ".join(str(m.message) for m in result.log_messages or ())
    costs = list((result.metric_evaluations or {}).values())
    cost = float(costs[0]) if costs else None
    return UpVerdict(result.status == ValidationResultStatus.VALID, messages, cost)


_UP_PROBLEMS: dict[str, tuple[Any, str]] = {}


def _up_problem(task: Task) -> tuple[Any, str]:
    """UP's reading of the task (cached by fingerprint: reading costs up to 0.7 s), or (None, why not)."""
    from unified_planning.environment import get_environment
    from unified_planning.io import PDDLReader

    # PDDL lets an action and an object share a name (floortile: `up`); UP refuses that unless told otherwise.
    get_environment().error_used_name = False
    cached = _UP_PROBLEMS.get(task.fingerprint)
    if cached is not None:
        return cached
    problem, why = None, ""
    for domain_text, problem_text in (
        (task.domain_pddl, task.problem_pddl),
        (domain_to_pddl(task.domain), problem_to_pddl(task.problem)),
    ):
        try:
            problem = PDDLReader().parse_problem_string(domain_text, problem_text)
            break
        except Exception as error:
            why = f"{type(error).__name__}: {error}"
    if len(_UP_PROBLEMS) >= 16:
        _UP_PROBLEMS.clear()
    _UP_PROBLEMS[task.fingerprint] = (problem, why)
    return problem, why
