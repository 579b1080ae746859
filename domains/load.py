"""Read tasks from files: PDDL domain + problem, or a JSON task. Missing or unreadable files are a
`TaskInputError` with the path, like every other bad input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from domains.errors import TaskInputError
from domains.model import Task
from domains.pddl import parse_task


def read_text(path: str | os.PathLike[str]) -> str:
    """The file's text; PDDL is ASCII but comments may hold anything, so undecodable bytes are replaced."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise TaskInputError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise TaskInputError(f"expected a file, got a directory: {path}") from None
    except OSError as error:
        raise TaskInputError(f"cannot read {path}: {error.strerror}") from None


def load_task(domain_path: str | os.PathLike[str] | Any, problem_path: str | os.PathLike[str] | None = None) -> Task:
    """Parse a PDDL domain and problem file into a `Task` that keeps the original texts; or, given a
    unified-planning `Problem` alone, convert it (`domains.up_bridge.task_from_up`)."""
    if type(domain_path).__module__.startswith("unified_planning.") and problem_path is None:
        from domains.up_bridge import task_from_up

        return task_from_up(domain_path)
    if not isinstance(domain_path, (str, os.PathLike)) or not isinstance(problem_path, (str, os.PathLike)):
        raise TypeError(
            "load_task takes a PDDL domain file and a problem file (paths), or a unified_planning Problem alone "
            f"(converted with domains.up_bridge.task_from_up); got {type(domain_path).__name__} and "
            f"{type(problem_path).__name__}"
        )
    domain_text = read_text(domain_path)
    problem_text = read_text(problem_path)
    return parse_task(domain_text, problem_text, str(domain_path), str(problem_path))


def load_json_task(path: str | Path) -> Task:
    """Parse a JSON task file (see `domains.json_task`, imported here: its pydantic models cost a PDDL task
    nothing)."""
    from domains.json_task import task_from_json

    return task_from_json(read_text(path), str(path))
