"""Errors of the trace store. Each `str()` is a one-paragraph user message naming the file and what was expected;
the CLI maps every `TraceStoreError` to exit code 2."""

from __future__ import annotations


class TraceStoreError(Exception):
    """Base class: the trace database cannot be used as asked."""


class CorruptDatabaseError(TraceStoreError):
    """The file is not an SQLite database, or its pages are damaged."""


class SchemaVersionError(TraceStoreError):
    """The database was written by a newer version of portfolio-planner (a schema this code does not know)."""


class DatabaseLockedError(TraceStoreError):
    """Other writers held the database lock for longer than every retry allowed."""


class TraceImportError(TraceStoreError, ValueError):
    """A JSONL trace file with bad lines; `problems` lists `(line number, message)` pairs."""

    def __init__(self, path: str, problems: list[tuple[int, str]], *, imported: int = 0) -> None:
        self.path = path
        self.problems = problems
        self.imported = imported
        super().__init__(self.__str__())

    def __str__(self) -> str:
        shown = "; ".join(f"{self.path}:{line}: {msg}" for line, msg in self.problems[:5])
        more = f" (and {len(self.problems) - 5} more bad lines)" if len(self.problems) > 5 else ""
        return (
            f"{len(self.problems)} bad line(s) in {self.path}, {self.imported} step(s) imported: {shown}{more}. "
            "Each line must be one JSON object with run_id, step, action, args and outcome "
            '("success" or "failure").'
        )
