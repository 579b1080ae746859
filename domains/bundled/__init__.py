"""Domains bundled with the library, each with a seeded generator of solvable problems of any size.

`blocksworld`, `gripper` (unit costs), `logistics` (action costs: flying dearer than driving) and `tools`
(an agent's tool calls with different costs and alternative routes to each goal). The domain files live next to
this module as package data; problems are generated on demand, so tests, benchmarks and demos can ask for any
size without shipping instance files.
"""

from __future__ import annotations

from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

from domains.bundled.generators import GENERATORS
from domains.model import Task

BUNDLED: tuple[str, ...] = ("blocksworld", "gripper", "logistics", "tools")


def _known(name: str) -> str:
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled domain '{name}'; expected one of: {', '.join(BUNDLED)}")
    return name


@cache
def domain_text(name: str) -> str:
    """The PDDL text of a bundled domain."""
    return resources.files(__package__).joinpath(_known(name), "domain.pddl").read_text(encoding="utf-8")


def generate_problem(name: str, size: int, seed: int = 0) -> str:
    """PDDL text of a solvable problem; `size` is the number of blocks / balls / packages / report jobs (>= 1).
    The same (name, size, seed) always gives the same text."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size must be a whole number >= 1, got {size!r}")
    return GENERATORS[_known(name)](size, int(seed))


@lru_cache(maxsize=128)
def bundled_task(name: str, size: int, seed: int = 0) -> Task:
    """A bundled domain and a generated problem, read into the task model. Cached: tasks are immutable, and
    handing out the same object lets the validator reuse its compiled form."""
    from domains.pddl import parse_task  # late: the parser is the heavier module, and only this needs it

    return parse_task(
        domain_text(name),
        generate_problem(name, size, seed),
        domain_file=f"bundled/{name}/domain.pddl",
        problem_file=f"bundled/{name}/{name}-{size}-{seed}.pddl",
    )


def write_instance(name: str, size: int, seed: int, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `<name>-domain.pddl` and `<name>-<size>-<seed>.pddl` into `out_dir` (created if missing) and return
    both paths, for planners and tools that read files."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    domain_path = out / f"{name}-domain.pddl"
    problem_path = out / f"{name}-{size}-{seed}.pddl"
    problem = generate_problem(name, size, seed)
    domain_path.write_text(domain_text(name), encoding="utf-8")
    problem_path.write_text(problem, encoding="utf-8")
    return domain_path, problem_path


__all__ = ["BUNDLED", "bundled_task", "domain_text", "generate_problem", "write_instance"]
