"""The validator as a critic: task + plan -> `Verdict` (valid or not, which step, why, what was missing).

Runtimes that plan with their own LLM want exactly this check (LLM-Modulo: a sound external validator with
back-prompting). Used by `POST /v1/validate`, the MCP tool `validate` and `portfolio validate`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from domains.errors import TaskInputError
from domains.ground_text import parse_ground_action
from domains.model import State, Task
from portfolio.serve.models import BadRequest, ValidateBody, Verdict, load_task

# `0: (pick-up b)` and `0.000: (pick-up b) [1.000]`: numbered lines (LLMs) and IPC's timestamped plan format
_NUMBERED = re.compile(r"^\d+(\.\d+)?\s*:\s*")
_DURATION = re.compile(r"\s*\[\d+(\.\d+)?\]$")


def parse_plan_lines(lines: Sequence[str], where: str = "plan") -> list:
    """Grounded actions from plan lines: `(pick-up a)` or `pick-up a`, optionally numbered (`0: (pick-up a)`,
    `0.000: (pick-up a) [1]`); blank lines and `;` comments skipped (the format `portfolio plan` prints and Fast
    Downward writes). A bad line is a `BadRequest` naming `where` and the line."""
    steps = []
    for number, line in enumerate(lines, start=1):
        text = _DURATION.sub("", _NUMBERED.sub("", line.split(";", 1)[0].strip()))
        if not text:
            continue
        problem = f"{where}:{number}: expected one action like (pick-up a), got {line.strip()!r}"
        if text.count("(") != text.count(")") or text.count("(") > 1:
            raise BadRequest(problem, "PlanSyntaxError")
        try:
            steps.append(parse_ground_action(text))
        except TaskInputError:
            raise BadRequest(problem, "PlanSyntaxError") from None
    return steps


def verdict(task: Task, steps: list, init=None) -> Verdict:
    from domains.validate import validate_plan

    checked = validate_plan(task, steps, init=init)
    return Verdict(
        valid=checked.ok,
        steps=len(steps),
        cost=checked.cost,
        failed_step=checked.failed_step,
        problem=checked.problem,
        message=checked.message or "the plan is valid",
        missing=list(checked.missing),
    )


def read_body(body: ValidateBody) -> tuple[Task, list, State | None]:
    """The task, the plan's steps and the initial state (None: the task's) of a request body; raises
    `BadRequest` / `TaskInputError` for input it cannot read."""
    from domains.literals import parse_ground_atoms

    task = load_task(body)
    init = parse_ground_atoms(task, body.init) if body.init is not None else None
    return task, parse_plan_lines(body.plan), init


def verdict_for(body: ValidateBody) -> Verdict:
    """The verdict on a request body; raises `BadRequest` / `TaskInputError` for input it cannot read."""
    return verdict(*read_body(body))
