"""Running one call's searches as `downward` processes: hand the SAS task over, wait, read the plan back.

The call's `search_plan.SearchPlan` says which searches (`searches.SEARCH_ALIASES`) run side by side and how the
wait ends. The SAS task is handed to pre-started `downward` processes (`portfolio.engine.search_pool`) under the
call's deadline; the wait ends on a plan, a proof, the deadline or the thread's stop signal
(`portfolio.engine.cancel`), and the plan or the reasons are read back from the processes' files.

Exit codes go through `exitcodes` (named as in Fast Downward's driver): when several searches run side by
side, one `aggregate` over the ones that ran decides the outcome, and a search that fails early never cuts
short another one that is still working. Everything here is a function of its arguments: the delegate owns the
process pool.
"""

from __future__ import annotations

import functools
import os
import select
import subprocess
import time
from pathlib import Path

from portfolio.delegates.fast_downward import anytime as fd_anytime
from portfolio.delegates.fast_downward import exitcodes as fd_exitcodes
from portfolio.delegates.fast_downward.sas import operator_action
from portfolio.delegates.fast_downward.search_plan import SearchPlan
from portfolio.delegates.fast_downward.searches import PROVING, SEARCH_ALIASES, search_binary
from portfolio.engine import cancel
from portfolio.engine.results import DelegateOutcome, Status
from portfolio.engine.search_pool import SearchProcessPool, wait_any
from traces.attempt_details import AttemptDetails


def command(alias: str, custom: str | None = None) -> tuple[str, ...]:
    """The `downward` command line of search `alias` (`custom`: a raw search string instead of its
    configuration): what a search process is started with, and what the pool keeps ready ones under."""
    return (_binary(), "--search", custom or SEARCH_ALIASES[alias])


@functools.cache
def _binary() -> str:
    return str(search_binary())


def run_searches(
    pool: SearchProcessPool, plan: SearchPlan, sas_text: str, deadline: float, details: AttemptDetails
) -> DelegateOutcome:
    """Run `plan.searches` side by side, each in a process taken from `pool`. `plan.race`: the first plan wins
    and the others are killed. `plan.anytime` (with costs, quality "anytime" or "optimal"): the cheapest plan of
    any search wins, the wait ends on a proof of optimality or once a plan exists after `plan.improve_by` (None:
    only a proof or the deadline), as `anytime` says; `plan.cost_scale` converts the SAS task's integer costs
    back for the details. Else (with costs, "first": the cost-blind one for coverage, the cost-aware one for
    cheap plans) the last alias's plan is preferred; once an earlier one has a plan, the later ones get a grace
    period of twice the time taken so far (at least 0.2 s) instead of the whole budget; after `plan.race_after`
    any plan ends the wait, as in a race. A search that exits without a plan never stops the others: only a
    plan (from the last one, unless racing), a proof, or the deadline does. `plan.custom`: the command is a raw
    search string, reported as "custom" instead of its alias."""
    commands = [(alias, command(alias, plan.custom)) for alias in plan.searches]
    improve_by = plan.improve_by(deadline)
    started = time.monotonic()
    runs = [(alias, pool.take(command)) for alias, command in commands]
    try:
        data = sas_text.encode()
        started_wall = time.time()
        for _, run in runs:
            if not _feed(run.process, data, deadline):
                return DelegateOutcome(
                    Status.TIMEOUT, reason="budget expired while handing the task to the search", details=details
                )
        if plan.anytime:
            codes, proof = fd_anytime.wait_anytime(runs, deadline, improve_by, PROVING, started_wall)
            return _anytime_outcome(runs, codes, proof, details, started_wall, plan.cost_scale)
        codes = _wait(runs, deadline, started, race=plan.race, race_after=plan.race_after)
        return _outcome(runs, codes, details, custom=bool(plan.custom))
    finally:
        for _, run in runs:
            pool.release(run)


def _anytime_outcome(
    runs,
    codes: dict[str, int | None],
    proof: str | None,
    details: AttemptDetails,
    started_wall: float,
    cost_scale: float,
) -> DelegateOutcome:
    """The cheapest plan found by any search, with every plan found and whether optimality was proved; without
    a plan, the verdict over the exit codes (`_outcome`)."""
    plans = fd_anytime.found_plans(runs, started_wall)
    best = fd_anytime.cheapest(plans)
    if best is None:
        return _outcome(runs, codes, details, custom=False)
    details["searches"] = {
        alias: "stopped once a plan was chosen" if code is None else fd_exitcodes.meaning(code)
        for alias, code in codes.items()
    }
    details["plans"] = [
        {"search": p.search, "cost": round(p.cost / cost_scale, 3), "ms": p.ms}
        for p in sorted(plans, key=lambda p: p.ms)
    ]
    details["search"] = best.search
    details["optimal"] = proof is not None
    return DelegateOutcome(Status.SOLVED, plan=_read_plan(Path(best.path)), details=details)


def _outcome(runs, codes: dict[str, int | None], details: AttemptDetails, custom: bool) -> DelegateOutcome:
    """One verdict over the searches that ran (`exitcodes.aggregate`)."""
    label = (lambda alias: "custom") if custom else (lambda alias: alias)
    details["searches"] = {label(alias): fd_exitcodes.meaning(code) for alias, code in codes.items()}
    verdict = fd_exitcodes.aggregate(codes)
    if verdict.status is Status.SOLVED:
        # Still running when another search's plan was taken: it lost the race, no deadline came.
        lost = f"stopped: {label(verdict.search)} found a plan first"
        details["searches"] = {
            label(alias): lost if code is None else fd_exitcodes.meaning(code) for alias, code in codes.items()
        }
        plan_path = dict(runs)[verdict.search].plan_path
        details["search"] = label(verdict.search)
        return DelegateOutcome(Status.SOLVED, plan=_read_plan(Path(plan_path)), details=details)
    if verdict.status is Status.UNSOLVABLE:
        details["search"] = label(verdict.search)
        return DelegateOutcome(Status.UNSOLVABLE, reason="search proved the task unsolvable", details=details)
    reasons = []
    for alias, run in runs:
        code = codes.get(alias)
        tail = "" if code is None else _tail(Path(run.output_path))
        reasons.append(f"{label(alias)}: {fd_exitcodes.meaning(code)}" + (f": {tail}" if tail else ""))
    prefix = "budget expired during search: " if verdict.status is Status.TIMEOUT else ""
    return DelegateOutcome(verdict.status, reason=prefix + "; ".join(reasons), details=details)


def _wait(
    runs, deadline: float, started: float, race: bool = False, race_after: float | None = None
) -> dict[str, int | None]:
    """Wait for the searches: until the last (preferred) one has a plan (any one, when racing or after
    `race_after`), one proves unsolvability, all have exited, or the deadline (shortened to a grace period once
    an earlier one has a plan). Exit codes by alias; None for those still running (killed by the caller)."""
    preferred = runs[-1][0]
    finish_by = deadline
    codes: dict[str, int | None] = {}
    while True:
        for alias, run in runs:
            if alias not in codes and run.process.poll() is not None:
                codes[alias] = run.process.returncode
        if len(codes) == len(runs) or codes.get(preferred) in fd_exitcodes.PLAN_FOUND:
            break
        racing = race or (race_after is not None and time.monotonic() >= race_after)
        if racing and any(code in fd_exitcodes.PLAN_FOUND for code in codes.values()):
            break
        if any(code in fd_exitcodes.PROVEN_UNSOLVABLE for code in codes.values()):
            break
        now = time.monotonic()
        if any(code in fd_exitcodes.PLAN_FOUND for code in codes.values()):
            finish_by = min(finish_by, now + max(0.2, 2 * (now - started)))
        if now >= finish_by or cancel.stopped():
            break
        wake = finish_by if race_after is None or now >= race_after else min(finish_by, race_after)
        wait_any([run.process for alias, run in runs if alias not in codes], wake - now)
    return {alias: codes.get(alias) for alias, _ in runs}


def _feed(process: subprocess.Popen, data: bytes, deadline: float) -> bool:
    """Hand the task to a waiting search process before `deadline`; False when the deadline came first (a
    search that does not read its input must not hold the caller). A process that died early just gets a
    closed pipe: its exit code says why."""
    assert process.stdin is not None
    fd = process.stdin.fileno()
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if cancel.stopped():
                return False
            _, writable, _ = select.select(cancel.stop_fds(), [fd], [], remaining)
            if not writable:
                return False
            try:
                view = view[os.write(fd, view[: 1 << 16]) :]
            except BlockingIOError:
                continue
        return True
    except BrokenPipeError:
        return True
    finally:
        try:
            process.stdin.close()
        except OSError:
            pass


def _read_plan(path: Path):
    plan = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("(") and line.endswith(")"):
            plan.append(operator_action(line[1:-1]))
    return plan


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])
