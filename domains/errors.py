"""Errors for bad input: each says where (file, line) and what was expected, and maps to exit code 2."""

from __future__ import annotations


class TaskInputError(ValueError):
    """Input that does not describe a valid planning task. `str()` is the one-paragraph user message."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.file = file
        self.line = line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        elif self.line:
            where = f"line {self.line}: "
        return where + self.message


class PDDLSyntaxError(TaskInputError):
    """Unbalanced parentheses, a missing section, a malformed expression."""


class UndefinedSymbolError(TaskInputError):
    """A predicate, type, object, constant or action that the domain/problem never declared."""


class ArityError(TaskInputError):
    """A predicate or action used with the wrong number of arguments."""


class TypeMismatchError(TaskInputError):
    """An object used where its type is not allowed: an argument of a predicate in a problem's initial state or
    goal whose declared type is neither the parameter's nor one of its subtypes."""


class UnsupportedFeatureError(TaskInputError):
    """Valid PDDL that this project does not model (e.g. derived predicates, numeric planning)."""


class SchemaError(TaskInputError):
    """A JSON task that does not match the task schema."""
