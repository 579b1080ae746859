"""Planning task models: the `Task` data model, PDDL and JSON readers and writers, the plan validator,
and bundled domains with instance generators. Depends on nothing else in this project."""

from domains.errors import (
    ArityError,
    PDDLSyntaxError,
    SchemaError,
    TaskInputError,
    UndefinedSymbolError,
    UnsupportedFeatureError,
)
from domains.literals import parse_atom, parse_state
from domains.model import Atom, GroundAction, Plan, State, Task

__all__ = [
    "ArityError",
    "Atom",
    "GroundAction",
    "PDDLSyntaxError",
    "Plan",
    "SchemaError",
    "State",
    "Task",
    "TaskInputError",
    "UndefinedSymbolError",
    "UnsupportedFeatureError",
    "parse_atom",
    "parse_state",
]
