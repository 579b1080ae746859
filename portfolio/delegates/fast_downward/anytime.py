"""Searching under costs: keep the cheapest plan the budget allows, stop on a proof that it is optimal.

With costs (the task's own, or learned ones) the first plan a satisficing search finds is often not the cheapest,
and learned costs change the plan a user gets only if the search respects them (what a cost-blind first plan
costs: `docs/decisions/anytime-search.md`). So calls with costs run cost-aware searches side by side
(`searches`):

- `anytime-wastar`: LAMA's first phase (a greedy first plan that ignores costs: lama-first's coverage), then
  eager weighted A* restarts with w = 5, 3, 2, 1 on the real costs, each bounded by the incumbent's cost, the
  last repeated until it finds nothing cheaper. It exits on its own only once its last phase has exhausted every
  state cheaper than the incumbent, so an exit with a plan proves that plan optimal;
- `seq-opt-lmcut` beside it on small tasks (A* with the admissible LM-cut heuristic): its plan is optimal.

Entry points, over the `SearchRun`s of one call:
- `found_plans(runs, started_wall)` -> `list[FoundPlan]` (search, plan file, cost, ms since `started_wall`): every plan
  written so far. Fast Downward writes each plan of an iterated search to `PLAN.1`, `PLAN.2`, ... (each cheaper
  than the last) and a single search's to `PLAN`, the cost last (`; cost = N (general cost)`); a plan file
  without that line is still being written and is skipped (`plan_files`, `read_found`).
- `wait_anytime(runs, deadline, improve_by, proving, started_wall)` -> (exit codes by alias, None for one still
  running; the alias whose exit proved its plan optimal, or None). It returns on a proof (a search in `proving`
  exited with a plan, or any search proved the task unsolvable), when every search has exited, at `deadline` or
  on a stop signal (`portfolio.engine.cancel`), or once a plan exists and `improve_by` has passed: the share of
  the call's budget the caller gives improvement (`quality` in `portfolio.delegates.fast_downward.delegate`).
- `cheapest(plans)`: the outcome, the cheapest plan found by any search (among equals the first found). The
  attempt's details record every plan found and whether optimality was proved."""

from __future__ import annotations

import glob
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from portfolio.delegates.fast_downward import exitcodes as fd_exitcodes
from portfolio.engine import cancel
from portfolio.engine.search_pool import SearchRun, wait_any

_COST_LINE = re.compile(r";\s*cost\s*=\s*(\d+)")
# After `improve_by`, while no plan exists yet, plan files are looked for this often (a search process does not
# tell us when it writes one; before `improve_by` nothing needs to know).
POLL_S = 0.005


@dataclass(frozen=True)
class FoundPlan:
    search: str
    path: str
    cost: int  # in the SAS task's integer costs
    ms: float  # when the file was written, after the searches started


def plan_files(run: SearchRun) -> list[str]:
    """The plan files a search has written: `PLAN` (a single search) or `PLAN.1`, `PLAN.2`, ... (iterated), in
    the order written."""
    numbered = glob.glob(glob.escape(run.plan_path) + ".*")
    numbered.sort(key=lambda path: int(path.rsplit(".", 1)[1]) if path.rsplit(".", 1)[1].isdigit() else -1)
    return ([run.plan_path] if os.path.exists(run.plan_path) else []) + numbered


def read_found(search: str, path: str, started_wall: float) -> FoundPlan | None:
    """The plan in `path` with its cost, or None while the file is incomplete (no cost line yet)."""
    try:
        text = Path(path).read_text()
        written = os.stat(path).st_mtime
    except OSError:
        return None
    match = _COST_LINE.search(text)
    if match is None:
        return None
    return FoundPlan(search, path, int(match.group(1)), round(max(0.0, written - started_wall) * 1000, 3))


def found_plans(runs: Sequence[tuple[str, SearchRun]], started_wall: float) -> list[FoundPlan]:
    plans = []
    for alias, run in runs:
        for path in plan_files(run):
            found = read_found(alias, path, started_wall)
            if found is not None:
                plans.append(found)
    return plans


def wait_anytime(
    runs: Sequence[tuple[str, SearchRun]],
    deadline: float,
    improve_by: float | None,
    proving: frozenset[str],
    started_wall: float,
) -> tuple[dict[str, int | None], str | None]:
    """Wait as the module docstring says (`started_wall`: `time.time()` when the searches started). Returns the
    exit codes by alias (None: still running) and the alias whose exit proved its plan optimal (None: none)."""
    codes: dict[str, int | None] = {}
    while True:
        for alias, run in runs:
            if alias not in codes and run.process.poll() is not None:
                codes[alias] = run.process.returncode
        proof = next((a for a, code in codes.items() if a in proving and code in fd_exitcodes.PLAN_FOUND), None)
        if proof is not None or len(codes) == len(runs):
            return _all(runs, codes), proof
        if any(code in fd_exitcodes.PROVEN_UNSOLVABLE for code in codes.values()):
            return _all(runs, codes), None
        now = time.monotonic()
        if now >= deadline or cancel.stopped():
            return _all(runs, codes), None
        if improve_by is not None and now >= improve_by and found_plans(runs, started_wall):
            return _all(runs, codes), None
        wake = deadline if improve_by is None else (improve_by if now < improve_by else now + POLL_S)
        wait_any([run.process for alias, run in runs if alias not in codes], min(wake, deadline) - now)


def _all(runs: Sequence[tuple[str, SearchRun]], codes: dict[str, int | None]) -> dict[str, int | None]:
    return {alias: codes.get(alias) for alias, _ in runs}


def cheapest(plans: Sequence[FoundPlan]) -> FoundPlan | None:
    """The cheapest plan; among equals the one found first."""
    return min(plans, key=lambda plan: (plan.cost, plan.ms), default=None)
