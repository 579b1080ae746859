"""Suites: what `portfolio bench run SUITE...` plans, read into a flat list of `TaskSpec`s.

A SUITE argument is one of

    DIR                       a domain folder (domain.pddl + problems) or a folder of them (`../shared/ipc`)
    FILE.txt                  a pairs file: `DOMAIN PROBLEM` a line, paths relative to the file, `#` comments
                              (the format of `../shared/ipc-more/pairs.txt`)
    gen:NAME:sizes=A..B[:seeds=C..D]   a sweep over a bundled generator (`gen:logistics:sizes=2..20`); sizes and
                              seeds are ranges `A..B` or lists `2,4,8`; seeds default to 0
    typed:research            the typed-agent scenario behind `make demo` (domains/bundled/tools_sim.py)
    typed:MODULE:FACTORY      any typed-agent scenario: MODULE is importable (on PYTHONPATH, in every run's
                              process and on Dask workers), FACTORY a function without arguments returning a
                              list of `@action` functions; the goal is what the `goal=True` actions produce,
                              the start every input type no action produces
    latency                   the instances of the old `portfolio bench` latency table, under --ipc

A `TaskSpec` is plain data (pydantic, JSON on the wire): it names a task without holding it, so it crosses to a
run's process or a Dask worker as a few hundred bytes, and every run re-reads its task where it runs. Domain and
problem paths are made absolute so a worker with the same checkout and `../shared` finds them.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from domains.errors import TaskInputError

DEFAULT_IPC = Path("../shared/ipc")


class SuiteError(TaskInputError):
    """A SUITE argument that names nothing runnable (missing folder, malformed pairs line, bad sweep)."""


class TaskSpec(BaseModel, frozen=True):
    """One task of a suite. `id` is unique in an experiment and stable across runs (the resume key)."""

    id: str
    domain: str  # the row of the coverage table
    kind: Literal["pddl", "gen", "typed"]
    domain_file: str | None = None
    problem_file: str | None = None
    generator: str | None = None
    size: int | None = None
    seed: int = 0
    scenario: str | None = None


# -- folders and pairs ---------------------------------------------------------------------------------------------


def problem_files(folder: Path) -> list[Path]:
    """The problems of a domain folder, smallest first (by file size, then name): a prefix of this list is the
    `--per-domain K` easiest tasks, as in the old coverage table."""
    found = [p for p in folder.glob("*.pddl") if p.name != "domain.pddl" and "domain" not in p.stem]
    return sorted(found, key=lambda p: (p.stat().st_size, p.name))


def folder_suite(folder: Path, per_domain: int | None = None) -> list[TaskSpec]:
    folder = folder.resolve()
    if (folder / "domain.pddl").exists():
        domains = [folder]
    else:
        domains = sorted(p for p in folder.iterdir() if (p / "domain.pddl").exists())
    if not domains:
        raise SuiteError(f"{folder}: no domain.pddl in this folder or its sub-folders")
    specs = []
    for domain in domains:
        for problem in problem_files(domain)[:per_domain]:
            specs.append(
                TaskSpec(
                    id=f"{domain.name}/{problem.name}",
                    domain=domain.name,
                    kind="pddl",
                    domain_file=str(domain / "domain.pddl"),
                    problem_file=str(problem),
                )
            )
    return specs


def read_pairs(path: Path) -> list[tuple[Path, Path]]:
    """`DOMAIN PROBLEM` pairs, resolved against the file's folder. Blank lines and `#` comments are skipped; a
    line with another number of fields, or a file that does not exist, is a `SuiteError` naming file and line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise SuiteError(f"cannot read pairs file: {error.strerror}", file=str(path)) from None
    base = path.resolve().parent
    pairs = []
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) != 2:
            raise SuiteError(
                f"expected 'DOMAIN PROBLEM' (two paths), got {len(fields)} field(s)", file=str(path), line=number
            )
        domain, problem = (base / f for f in fields)
        for file in (domain, problem):
            if not file.is_file():
                raise SuiteError(f"no such file: {file}", file=str(path), line=number)
        pairs.append((domain, problem))
    if not pairs:
        raise SuiteError("no DOMAIN PROBLEM pairs in the file", file=str(path))
    return pairs


def pairs_suite(path: Path, per_domain: int | None = None) -> list[TaskSpec]:
    """Tasks of a pairs file; the coverage row is the problem's folder; `per_domain` keeps the first K of each."""
    specs: list[TaskSpec] = []
    seen: dict[str, int] = {}
    for domain, problem in read_pairs(path):
        row = problem.parent.name
        seen[row] = seen.get(row, 0) + 1
        if per_domain is not None and seen[row] > per_domain:
            continue
        specs.append(
            TaskSpec(
                id=f"{row}/{problem.name}", domain=row, kind="pddl", domain_file=str(domain), problem_file=str(problem)
            )
        )
    return specs


# -- generator sweeps and typed scenarios ------------------------------------------------------------------------


def parse_range(text: str, what: str, suite: str) -> list[int]:
    """`2..20` (inclusive), `2,4,8` or `5`."""
    try:
        if ".." in text:
            low, high = (int(part) for part in text.split("..", 1))
            values = list(range(low, high + 1))
        else:
            values = [int(part) for part in text.split(",") if part]
    except ValueError:
        raise SuiteError(
            f"{suite}: {what} must be A..B or a comma-separated list of whole numbers, got {text!r}"
        ) from None
    if not values:
        raise SuiteError(f"{suite}: {what} {text!r} is empty")
    return values


def gen_suite(text: str) -> list[TaskSpec]:
    from domains.bundled import BUNDLED

    parts = text.split(":")
    if len(parts) < 3 or parts[1] not in BUNDLED:
        raise SuiteError(f"{text}: expected gen:NAME:sizes=A..B[:seeds=C..D] with NAME one of {', '.join(BUNDLED)}")
    options = {}
    for part in parts[2:]:
        key, _, value = part.partition("=")
        if key not in ("sizes", "seeds") or not value:
            raise SuiteError(f"{text}: unknown option {part!r}; expected sizes=A..B and optionally seeds=C..D")
        options[key] = parse_range(value, key, text)
    if "sizes" not in options:
        raise SuiteError(f"{text}: sizes=A..B is required")
    if min(options["sizes"]) < 1:
        raise SuiteError(f"{text}: sizes must be >= 1")
    name = parts[1]
    return [
        TaskSpec(id=f"gen/{name}-{size}-{seed}", domain=f"gen-{name}", kind="gen", generator=name, size=size, seed=seed)
        for size in options["sizes"]
        for seed in options.get("seeds", [0])
    ]


TYPED_SCENARIOS = {"research": "domains.bundled.tools_sim:make_tools"}
TYPED_CONTRACT = "a non-empty list of typed actions (functions decorated with @action, at least one goal=True)"


def typed_suite(text: str) -> list[TaskSpec]:
    scenario = text.split(":", 1)[1]
    target = TYPED_SCENARIOS.get(scenario, scenario)
    if ":" not in target:
        raise SuiteError(f"{text}: expected typed:research or typed:MODULE:FACTORY")
    typed_task(target)  # fail here, in the caller's process, rather than in every run
    return [TaskSpec(id=f"typed/{scenario}", domain=f"typed-{scenario.split(':')[-1]}", kind="typed", scenario=target)]


def typed_task(target: str):
    """The planning task of a typed-agent scenario `MODULE:FACTORY`."""
    from domains.typed_actions import TypedAction, compile_actions, fact

    module_name, _, factory_name = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError) as error:
        raise SuiteError(f"typed scenario {target}: {error}") from None
    try:
        actions = list(factory())
    except Exception as error:
        raise SuiteError(
            f"typed scenario {target}: {factory_name}() failed ({type(error).__name__}: {error}); "
            f"expected a function without arguments returning {TYPED_CONTRACT}"
        ) from None
    if not actions or not all(isinstance(a, TypedAction) for a in actions):
        raise SuiteError(f"typed scenario {target}: {factory_name}() must return {TYPED_CONTRACT}")
    produced = {fact(t) for a in actions for t in a.outputs}
    needed = {fact(t) for a in actions for _, t in a.inputs}
    goals = [t for a in actions if a.goal for t in a.outputs]
    if not goals:
        raise SuiteError(f"typed scenario {target}: no action is marked @action(goal=True)")
    return compile_actions(actions, goals, init=needed - produced)


# -- the latency table's instances, and (label, domain, problem) triples for measurements -------------------------

LATENCY_INSTANCES = {
    "blocks": ["probBLOCKS-4-0.pddl", "probBLOCKS-5-0.pddl", "probBLOCKS-6-0.pddl"],
    "gripper": ["prob01.pddl", "prob02.pddl"],
    "logistics00": ["probLOGISTICS-4-0.pddl", "probLOGISTICS-5-0.pddl"],
    "miconic": ["s1-0.pddl", "s2-0.pddl", "s3-0.pddl"],
}


def latency_instances(ipc: Path) -> tuple[Path, dict[str, list[str]]]:
    """(base folder, domain -> problem files) to time: `LATENCY_INSTANCES` under an IPC folder, or, for one
    domain folder (`../shared/ipc/blocks`, as `bench run` takes), that domain's latency instances, else its two
    smallest problems."""
    ipc = Path(ipc)
    if not (ipc / "domain.pddl").exists():
        return ipc, LATENCY_INSTANCES
    problems = LATENCY_INSTANCES.get(ipc.name) or [p.name for p in problem_files(ipc)[:2]]
    return ipc.parent, {ipc.name: problems}


def latency_suite(ipc: Path) -> list[TaskSpec]:
    """The instances of `portfolio bench latency`'s table (`LATENCY_INSTANCES`)."""
    ipc = ipc.resolve()
    specs = []
    for domain, problems in LATENCY_INSTANCES.items():
        for problem in problems:
            path = ipc / domain / problem
            if not path.is_file():
                raise SuiteError(f"latency suite: {path} not found (pass --ipc, the IPC folder)")
            specs.append(
                TaskSpec(
                    id=f"{domain}/{problem}",
                    domain=domain,
                    kind="pddl",
                    domain_file=str(ipc / domain / "domain.pddl"),
                    problem_file=str(path),
                )
            )
    return specs


def benchmark_pairs(source: Path, per_domain: int | None = None) -> list[tuple[str, Path, Path]]:
    """(domain label, domain file, problem file) triples of a benchmark folder or a `pairs.txt`: the tasks
    `folder_suite` / `pairs_suite` list (the `per_domain` smallest of each folder, or the first `per_domain`
    pairs of each domain folder, in file order), as the plain triples the latency and coverage measurements and
    the micro-benchmarks iterate over."""
    source = Path(source)
    specs = pairs_suite(source, per_domain) if source.is_file() else folder_suite(source, per_domain)
    return [(spec.domain, Path(spec.domain_file or ""), Path(spec.problem_file or "")) for spec in specs]


# -- dispatch ----------------------------------------------------------------------------------------------------


def read_suite(text: str, per_domain: int | None = None, ipc: Path = DEFAULT_IPC) -> list[TaskSpec]:
    """The tasks a SUITE argument names (see the module docstring)."""
    if text.startswith("gen:"):
        return gen_suite(text)
    if text.startswith("typed:"):
        return typed_suite(text)
    if text == "latency":
        return latency_suite(ipc)
    path = Path(text)
    if path.is_dir():
        return folder_suite(path, per_domain)
    if path.is_file():
        return pairs_suite(path, per_domain)
    raise SuiteError(f"{text}: not a folder, a pairs file, gen:NAME:sizes=A..B, typed:SCENARIO or 'latency'")


def read_suites(texts: list[str], per_domain: int | None = None, ipc: Path = DEFAULT_IPC) -> list[TaskSpec]:
    """All tasks of several suites, in order, each task once (the first suite that names it wins)."""
    specs: dict[str, TaskSpec] = {}
    for text in texts:
        for spec in read_suite(text, per_domain, ipc):
            specs.setdefault(spec.id, spec)
    return list(specs.values())


def load(spec: TaskSpec):
    """The `Task` a spec names (parsed where the run happens)."""
    if spec.kind == "gen":
        from domains.bundled import bundled_task

        assert spec.generator and spec.size
        return bundled_task(spec.generator, spec.size, spec.seed)
    if spec.kind == "typed":
        assert spec.scenario
        return typed_task(spec.scenario)
    from domains.load import load_task

    assert spec.domain_file and spec.problem_file
    return load_task(spec.domain_file, spec.problem_file)


def files(spec: TaskSpec, task, workdir: Path) -> tuple[Path, Path]:
    """Domain and problem files for planners that read files (the driver, unified-planning): the originals for
    PDDL suites, the task's texts written into `workdir` otherwise."""
    if spec.kind == "pddl" and spec.domain_file and spec.problem_file:
        return Path(spec.domain_file), Path(spec.problem_file)
    domain, problem = workdir / "domain.pddl", workdir / "problem.pddl"
    domain.write_text(task.domain_pddl, encoding="utf-8")
    problem.write_text(task.problem_pddl, encoding="utf-8")
    return domain, problem


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str) -> str:
    """A file-name-safe form of an id (for plots and scratch folders)."""
    return _SAFE.sub("_", text).strip("_")
