"""Planners: what `--planners` names, and how one of them plans one task inside a run's process.

    cascade               this project's default cascade (Fast Downward, pyperplan; then the goal-agenda
                          decomposer tier with --decomposer-budget)
    classical             the classical tier alone (Fast Downward, pyperplan), as the old coverage table ran it
    cascade:A+B           a cascade of the named delegates (`cascade:typed-search+fast-downward`)
    DELEGATE              one delegate alone, by its CLI name: fast-downward, pyperplan, typed-search, goal-agenda
    driver:ALIAS          the raw Fast Downward driver (`fast-downward.py --alias ALIAS`, the wheel's script)
    up:ENGINE             a unified-planning OneshotPlanner engine that is installed (up:pyperplan, up:fast-downward)

What is timed. Every planner pays its set-up outside `time_s` and inside `wall_s` (the run's whole process):
the Planner-based ones build a `Planner` and plan a two-block task once first (workers started, imports done;
the translation cache emptied after), so `time_s` is the first plan of this task by a warm planner, the number
the old latency table reported; the driver's `time_s` is its whole run (interpreter, translator process, search
process: what a user of the driver pays every time); unified-planning's `time_s` is `solve()` alone, with the
import (~2 s) and the PDDL parse in `setup_s`. `translate_s`/`search_s` come from the delegate's details or the
driver's log, where known.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portfolio.engine.limits import die_with_parent


class PlannerError(ValueError):
    """A --planners entry that names no planner (the message lists the forms that exist)."""


@dataclass
class Outcome:
    """What one planner did on one task, before validation."""

    status: str  # a portfolio.engine.results.Status value: solved, unsolvable, timeout, incomplete, memout, error...
    plan: list[str] = field(default_factory=list)  # grounded actions, PDDL form
    time_s: float | None = None
    setup_s: float | None = None
    translate_s: float | None = None
    search_s: float | None = None
    delegate: str | None = None  # which delegate of a cascade solved it (the decomposer tier's share)
    reason: str = ""


def _delegate_names() -> tuple[str, ...]:
    from portfolio.delegates.registry import CLASSICAL_DELEGATES, DECOMPOSER_DELEGATES

    return CLASSICAL_DELEGATES + DECOMPOSER_DELEGATES


def cascade_names(name: str) -> tuple[str, ...] | None:
    """The delegate names a Planner-based planner stands for; None for driver: and up: planners."""
    from portfolio.delegates.registry import CLASSICAL_ONLY, DEFAULT_DELEGATES

    if name == "cascade":
        return DEFAULT_DELEGATES
    if name == "classical":
        return CLASSICAL_ONLY
    if name.startswith("cascade:"):
        return tuple(n for n in name.split(":", 1)[1].split("+") if n)
    if name in _delegate_names():
        return (name,)
    return None


def check_planner(name: str) -> str:
    """`name` if it names a planner here, else PlannerError. up: engines are checked against the installed ones
    (this imports unified-planning, ~2 s, only when an up: planner is asked for)."""
    known = "cascade, classical, cascade:A+B, " + ", ".join(_delegate_names()) + ", driver:ALIAS, up:ENGINE"
    names = cascade_names(name)
    if names is not None:
        unknown = [n for n in names if n not in _delegate_names()]
        if unknown or not names:
            raise PlannerError(
                f"unknown delegate {', '.join(unknown) or '(none)'} in planner {name!r}; "
                f"delegates: {', '.join(_delegate_names())}"
            )
        return name
    if name.startswith("driver:"):  # the driver checks the alias itself (a bad one: every run an error)
        if not re.fullmatch(r"[a-z0-9-]+", name.split(":", 1)[1]):
            raise PlannerError(f"planner {name!r}: expected driver:ALIAS, e.g. driver:lama-first")
        return name
    if name.startswith("up:"):
        engines = up_engines()
        if name[3:] not in engines:
            raise PlannerError(
                f"planner {name!r}: no unified-planning OneshotPlanner engine {name[3:]!r}; "
                f"installed: {', '.join(engines) or 'none'}"
            )
        return name
    raise PlannerError(f"unknown planner {name!r}; expected one of: {known}")


def parse_planners(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise PlannerError("--planners is empty; expected e.g. cascade,driver:lama-first")
    if len(set(names)) != len(names):
        raise PlannerError(f"--planners names a planner twice: {text}")
    return [check_planner(n) for n in names]


def up_engines() -> list[str]:
    """unified-planning engines that can solve a classical task in one shot."""
    try:
        from unified_planning.engines.mixins.oneshot_planner import OneshotPlannerMixin
        from unified_planning.environment import get_environment
    except ImportError:
        return []
    factory = get_environment().factory
    found = []
    for name in factory.engines:
        try:
            engine = factory.engine(name)
        except Exception:  # an engine whose optional dependency is missing
            continue
        if issubclass(engine, OneshotPlannerMixin) and "[" not in name:
            found.append(name)
    return found


def hard_budget_s(name: str, budget_s: float, decomposer_budget_s: float) -> float:
    """How long the planning part of a run may take before its process group is killed: the planner's own
    budget, plus the decomposer tier's when the planner has one."""
    names = cascade_names(name) or ()
    from portfolio.delegates.registry import DECOMPOSER_DELEGATES

    return budget_s + (decomposer_budget_s if any(n in DECOMPOSER_DELEGATES for n in names) else 0.0)


# -- running, inside a run's process -----------------------------------------------------------------------------


def run_planner(
    name: str,
    task,
    domain_file: Path,
    problem_file: Path,
    budget_s: float,
    decomposer_budget_s: float,
    workdir: Path,
    ready: Callable[[], None],
) -> Outcome:
    """Plan `task` with planner `name`; call `ready()` when set-up is done and the timed part starts."""
    if name.startswith("driver:"):
        ready()
        return run_driver(name.split(":", 1)[1], domain_file, problem_file, budget_s, workdir)
    if name.startswith("up:"):
        return run_up(name[3:], domain_file, problem_file, budget_s, workdir, ready)
    return run_cascade(name, task, budget_s, decomposer_budget_s, ready)


def run_cascade(name: str, task, budget_s: float, decomposer_budget_s: float, ready: Callable[[], None]) -> Outcome:
    from domains.bundled import bundled_task
    from portfolio.delegates.registry import build_stages
    from portfolio.planner import Planner

    started = time.monotonic()
    # As the service's workers: a long-lived planner, warmed on a bundled task.
    stages = build_stages(cascade_names(name) or (), budget_s=budget_s, decomposer_budget_s=decomposer_budget_s)
    with Planner(stages) as planner:
        planner.plan(bundled_task("blocksworld", 2))  # workers up, imports done: time the warm planner...
        for delegate in planner._all_delegates():  # ...on its first plan of this task, as the old latency table
            if hasattr(delegate, "forget_translations"):
                delegate.forget_translations()
        setup = time.monotonic() - started
        ready()
        start = time.monotonic()
        result = planner.plan(task)
        elapsed = time.monotonic() - start
    from portfolio.delegates.fast_downward.inprocess import INPROCESS_NAME

    outcome = Outcome(result.status.value, list(result.plan), elapsed, setup, delegate=result.delegate)
    for attempt in result.attempts:
        translate_ms = attempt.details.get("translate_ms")
        if attempt.delegate in ("fast-downward", INPROCESS_NAME) and translate_ms is not None:
            outcome.translate_s = round(translate_ms / 1000, 6)
            outcome.search_s = round(max(0.0, attempt.elapsed_ms - translate_ms) / 1000, 6)
    if not result.solved:
        outcome.reason = "; ".join(f"{a.delegate}: {a.status.value} {a.reason}".strip() for a in result.attempts)
    return outcome


_DONE = re.compile(r"^Done! \[[\d.]+s CPU, ([\d.]+)s wall-clock\]", re.M)
_TOTAL = re.compile(r"\] Total time: ([\d.]+)s", re.M)


def driver_script() -> Path:
    """The wheel's `fast-downward.py` (up-fast-downward ships the whole Fast Downward driver)."""
    spec = importlib.util.find_spec("up_fast_downward")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0]) / "downward" / "fast-downward.py"


def _run_script(arguments: list[str], workdir: Path, budget_s: float | None) -> tuple[int | None, float]:
    """`fast-downward.py ARGUMENTS` in `workdir`, output to `workdir/driver.log`, in a process group of its own
    that dies with this thread and is killed at `budget_s`: (exit code or None when killed, wall seconds). The
    one place the raw driver is started, for runs (`run_driver`) and translations (`driver_translate`)."""
    start = time.monotonic()
    with open(workdir / "driver.log", "wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(driver_script()), *arguments],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        try:
            code: int | None = process.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
    return code, time.monotonic() - start


def run_driver(alias: str, domain_file: Path, problem_file: Path, budget_s: float | None, workdir: Path) -> Outcome:
    """One `fast-downward.py --alias ALIAS` run in `workdir`, its own process group killed at the budget."""
    from portfolio.delegates.fast_downward import exitcodes as fd_exitcodes
    from portfolio.engine.results import Status

    code, elapsed = _run_script(
        ["--alias", alias, str(Path(domain_file).resolve()), str(Path(problem_file).resolve())], workdir, budget_s
    )
    if code is None:
        return Outcome("timeout", time_s=elapsed, reason=f"killed at {budget_s} s")
    text = (workdir / "driver.log").read_text(errors="replace")
    translate = _DONE.findall(text)
    search = _TOTAL.findall(text)
    status = fd_exitcodes.status_of(code)  # the driver's exit codes are Fast Downward's returncodes
    outcome = Outcome(
        status.value,
        time_s=elapsed,
        translate_s=float(translate[-1]) if translate else None,
        search_s=float(search[-1]) if search else None,
    )
    plan_file = workdir / "sas_plan"
    if status is Status.SOLVED and plan_file.exists():
        outcome.plan = [
            line.strip() for line in plan_file.read_text().splitlines() if line.strip() and not line.startswith(";")
        ]
    elif status is Status.SOLVED:
        outcome.status, outcome.reason = Status.ERROR.value, f"driver exit code {code} but no sas_plan"
    elif status is not Status.UNSOLVABLE:
        outcome.reason = f"{fd_exitcodes.meaning(code)}: " + " | ".join(text.strip().splitlines()[-2:])
    return outcome


def solve_with_driver(
    domain_file: Path, problem_file: Path, timeout: float | None = None, alias: str = "lama-first"
) -> tuple[bool, float]:
    """`run_driver` in a fresh scratch folder, for measurements outside `bench run` (the latency and coverage
    tables, the micro-benchmarks): (solved, wall seconds of the driver's whole run)."""
    workdir = Path(tempfile.mkdtemp(prefix="portfolio-driver-"))
    try:
        outcome = run_driver(alias, domain_file, problem_file, timeout, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return outcome.status == "solved", outcome.time_s or 0.0


def driver_translate(domain_file: Path, problem_file: Path, timeout: float | None = None) -> str | None:
    """The SAS text the raw driver's translator writes (`fast-downward.py --translate`), or None when it failed
    or ran out of time: the reference the warm translator's output is compared with."""
    workdir = Path(tempfile.mkdtemp(prefix="portfolio-driver-"))
    try:
        code, _ = _run_script(
            ["--translate", str(Path(domain_file).resolve()), str(Path(problem_file).resolve())], workdir, timeout
        )
        output = workdir / "output.sas"
        return output.read_text() if code == 0 and output.exists() else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_up(
    engine: str, domain_file: Path, problem_file: Path, budget_s: float, workdir: Path, ready: Callable[[], None]
) -> Outcome:
    """unified-planning's OneshotPlanner(name=ENGINE).solve(timeout=budget), in `workdir` (its Fast Downward
    writes output.sas into the current folder)."""
    started = time.monotonic()
    os.chdir(workdir)
    import unified_planning.engines.results as results
    from unified_planning.io import PDDLReader
    from unified_planning.shortcuts import OneshotPlanner, get_environment

    get_environment().credits_stream = None
    try:
        problem = PDDLReader().parse_problem(str(domain_file), str(problem_file))
    except Exception as error:  # UP rejects some files other parsers accept (FIELD-NOTES: logistics00)
        return Outcome("error", setup_s=time.monotonic() - started, reason=f"unified-planning parser: {error}")
    with OneshotPlanner(name=engine) as planner:
        setup = time.monotonic() - started
        ready()
        start = time.monotonic()
        try:
            result = planner.solve(problem, timeout=budget_s)
        except Exception as error:
            return Outcome("error", time_s=time.monotonic() - start, setup_s=setup, reason=f"{engine}: {error}")
        elapsed = time.monotonic() - start
    status = result.status
    kinds = results.PlanGenerationResultStatus
    if status in (kinds.SOLVED_SATISFICING, kinds.SOLVED_OPTIMALLY):
        plan = [
            f"({a.action.name} {' '.join(str(p) for p in a.actual_parameters)})".replace(" )", ")")
            for a in result.plan.actions
        ]
        return Outcome("solved", plan, elapsed, setup)
    if status in (kinds.UNSOLVABLE_PROVEN, kinds.UNSOLVABLE_INCOMPLETELY):
        return Outcome("unsolvable", time_s=elapsed, setup_s=setup)
    if status == kinds.TIMEOUT:
        return Outcome("timeout", time_s=elapsed, setup_s=setup)
    return Outcome("error", time_s=elapsed, setup_s=setup, reason=f"{engine}: {status.name}")


def outcome_fields(outcome: Outcome) -> dict[str, Any]:
    return {k: v for k, v in vars(outcome).items() if k != "plan"}
