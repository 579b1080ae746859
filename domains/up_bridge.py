"""Read a unified-planning `Problem` built in Python into the task model.

The problem goes through UP's own PDDL writer and then `domains.pddl`, so one parser decides what a task means.
unified-planning is imported inside the function only: importing it costs ~2.5 s, and nothing in `domains` may
pay that at import time.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from domains.errors import TaskInputError
from domains.model import Task
from domains.pddl import parse_task
from domains.pddl_writer import task_with_texts

_PDDL_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
# Words that would change the meaning of the text; UP also avoids harmless ones ("goal", "action", "domain")
# that Fast Downward and `domains.pddl` read fine as names.
_RESERVED = frozenset({"and", "or", "not", "imply", "exists", "forall", "when", "increase", "decrease", "assign",
                       "scale-up", "scale-down", "either", "define", "object", "number", "total-cost"})


def task_from_up(problem: Any) -> Task:
    """Convert a `unified_planning.model.Problem` into a `Task`.

    UP renames items whose names are not valid PDDL or clash; names it renamed are mapped back when the
    original (lower-cased) is a valid PDDL name that no other item uses, so plans speak the user's names. When
    nothing was renamed the task keeps UP's texts; otherwise the texts come from the writer.
    """
    from unified_planning.io import PDDLWriter  # lazy: ~2.5 s import

    writer = PDDLWriter(problem)
    try:
        domain_text, problem_text = writer.get_domain(), writer.get_problem()
    except Exception as error:  # UP raises its own exception types for problems PDDL cannot express
        raise TaskInputError(f"unified-planning cannot write this problem as PDDL: {error}") from None
    task = parse_task(domain_text, problem_text, "<unified-planning domain>", "<unified-planning problem>")
    mapping = _renamings(writer.nto_renamings)
    if not mapping:
        return task
    return task_with_texts(_rename(task.domain, mapping), _rename(task.problem, mapping))


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
