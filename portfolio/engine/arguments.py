"""The checks `Planner.plan` runs on its arguments before anything else: inputs that say what they take.

Python callers get no pydantic model at the edge, so a wrong type once travelled into the delegates and failed
there: a list of Atoms crashed Fast Downward's cache key (`frozenset ^ list`, a traceback) and fell through to
pyperplan; a set of plan-spelled strings printed two tracebacks and came back `incomplete`. Here every argument
is read into the one form the cascade takes, or refused with a `TypeError` naming the expected types (bad text
in a right type is the usual `TaskInputError`, as from a file), before any delegate runs.

An excluded action must be one of the task's (`check_excluded`): a misspelt name, a wrong arity or an unknown
object once excluded nothing without a word, and the plan used the very action the caller meant to avoid.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from domains.errors import ArityError, UndefinedSymbolError
from domains.ground_text import ground_action_text, normalise_actions, parse_ground_action
from domains.literals import parse_state
from domains.model import GroundAction, State, Task

ACTION_TYPES = 'a list (any iterable) of domains.GroundAction or of actions spelled as in plans, like "(pick-up b)"'


def check_task(task: Any) -> Task:
    """`task` as a `Task`: a unified-planning `Problem` is converted (`domains.up_bridge.task_from_up`: UP's PDDL
    writer, then the project's reader; `UnsupportedFeatureError` for what the task model lacks); anything else
    that is not a `Task` is a `TypeError` saying how to make one."""
    if isinstance(task, Task):
        return task
    if _is_up_problem(task):
        from domains.up_bridge import task_from_up

        return task_from_up(task)
    raise TypeError(
        f"task must be a domains.Task (read one with domains.load, domains.pddl.parse_task or "
        f"domains.json_task.task_from_json) or a unified_planning Problem (converted with "
        f"domains.up_bridge.task_from_up); got {type(task).__name__}"
    )


def _is_up_problem(value: Any) -> bool:
    """A unified-planning problem, recognised without importing unified-planning (~2.5 s) when it is not one."""
    return type(value).__module__.startswith("unified_planning.") and hasattr(value, "kind")


def check_state(task: Task, init: Any) -> State | None:
    """`init` as a state of `task` (None: the task's own initial state); `domains.literals.parse_state`."""
    return parse_state(task, init)


def check_actions(name: str, actions: Any) -> tuple[GroundAction | str, ...]:
    """`excluded` / `previous_plan` as a tuple of GroundActions and strings; TypeError for anything else."""
    if isinstance(actions, (str, bytes, GroundAction)) or not isinstance(actions, Iterable):
        raise TypeError(f"{name} must be {ACTION_TYPES}; got {type(actions).__name__}")
    items = tuple(actions)
    for item in items:
        if not isinstance(item, (GroundAction, str)):
            raise TypeError(f"{name} must be {ACTION_TYPES}; it holds {type(item).__name__} {item!r:.60}")
    normalise_actions(items)  # bad text: PDDLSyntaxError now, not inside a delegate
    return items


def check_excluded(task: Task, actions: tuple[GroundAction | str, ...]) -> None:
    """Each action of `actions` (from `check_actions`) names an action of `task` with its arity and objects the
    task knows; `UndefinedSymbolError` / `ArityError` saying which otherwise. Nothing to do (every plan call
    without exclusions) costs nothing: the task's objects are looked up only when there is something to check."""
    if not actions:
        return
    objects = task.objects()
    for action in actions:
        ground = parse_ground_action(ground_action_text(action))
        schema = task.domain.action(ground.name)
        if schema is None:
            known = ", ".join(sorted(s.name for s in task.domain.actions))
            raise UndefinedSymbolError(f"excluded {str(ground)!r}: unknown action '{ground.name}' (known: {known})")
        if len(ground.args) != len(schema.parameters):
            raise ArityError(
                f"excluded {str(ground)!r}: action '{ground.name}' takes {len(schema.parameters)} arguments, "
                f"got {len(ground.args)}"
            )
        for arg in ground.args:
            if arg not in objects:
                raise UndefinedSymbolError(f"excluded {str(ground)!r}: unknown object '{arg}'")
