"""The search side of the Fast Downward delegate: which searches to run, and running `downward` processes.

Fast Downward's driver keeps translate, search and portfolio apart (`aliases.py`, `run_components.py`,
`portfolio_runner.py`); so does this project. `portfolio.delegates.fast_downward.delegate` translates and caches; this
module holds what happens once a SAS task exists:
- the search configurations by alias (`SEARCH_ALIASES`), with the measured reasons for each choice beside them;
- which of them one call runs side by side (`search_aliases`: a small portfolio over the cores available, first
  plan wins on unit costs, the cost-aware plan preferred with costs);
- running them (`run_searches`): the SAS task is handed to pre-started `downward` processes
  (`portfolio.engine.search_pool`) under the call's deadline, the wait ends on a plan, a proof, the deadline or
  the thread's stop signal (`portfolio.engine.cancel`), and the plan or the reasons are read back from the
  processes' files.

Exit codes go through `exitcodes` (named as in Fast Downward's driver): when several searches run side by
side, one `aggregate` over the ones that ran decides the outcome, and a search that fails early never cuts
short another one that is still working. Everything here is a function of its arguments: the delegate owns the
process pool, the binary and the configuration.
"""

from __future__ import annotations

import importlib.util
import os
import select
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from portfolio.delegates.fast_downward import anytime as fd_anytime
from portfolio.delegates.fast_downward import exitcodes as fd_exitcodes
from portfolio.delegates.fast_downward.sas import operator_action
from portfolio.engine import cancel
from portfolio.engine.results import DelegateOutcome, Status
from portfolio.engine.search_pool import SearchProcessPool, wait_any
from traces.attempt_details import AttemptDetails

_LAMA_FIRST = (
    "let(hlm, eval_modify_costs(landmark_sum(lm_factory=lm_reasonable_orders_hps(lm_rhw()),pref=false),"
    "cost_type=one),let(hff, eval_modify_costs(ff(),cost_type=one),"
    "lazy_greedy([hff,hlm],preferred=[hff,hlm],cost_type=one,reopen_closed=false)))"
)
# Cost-sensitive, first plan only (`quality="first"`): LAMA's heuristics on real costs (plus one, so zero-cost
# actions still count) in an eager weighted A*. Eager, not lazy as in LAMA: lazy search scores a successor by its
# parent's estimate, so on a task where one expensive action reaches the goal directly it takes that action
# (measured: cost 100 vs 3). With w = 3 the heuristic outweighs the cost already paid, so its first plan may be
# a short risky route where a longer safe one is cheaper (`portfolio.delegates.fast_downward.anytime`).
_LAMA_COSTS = (
    "let(hlm, eval_modify_costs(landmark_sum(lm_factory=lm_reasonable_orders_hps(lm_rhw()),pref=false),"
    "cost_type=plusone),let(hff, eval_modify_costs(ff(),cost_type=plusone),"
    "eager_wastar([hff,hlm],preferred=[hff,hlm],w=3)))"
)
# Anytime (`quality="anytime"|"optimal"`): LAMA's first phase (lazy greedy, FF and landmarks on unit costs: the
# coverage of lama-first), then eager weighted A* with FF on the real costs (plus one), w = 5, 3, 2, 1, each bounded
# by the incumbent's cost, the last repeated. This build's iterated search has no `continue_on_fail` and goes on
# after a phase that finds nothing ("No solution found - keep searching"), so the search exits only once its last
# phase (A* order, reopening, pruning on g alone) has exhausted every state cheaper than the incumbent: an exit
# with a plan proves that plan optimal.
# Not the driver's `--alias lama` (it was, up to 0.1.0): LAMA's second phase, a greedy search on the real costs
# bounded by the first plan's cost, ignores g and so can search the whole bounded space without finding anything
# (on bundled logistics-6 with learned costs it ran for 3 s of a 1 s budget while the weighted A* phases behind it
# never started). Measured on the tuning tasks (bundled logistics-6 and gripper-8 problems 0-29 with learned costs,
# `portfolio bench learning --bundled-episodes`; `python -m benchmarks.experiments.cost_search --first-seed 0 --seeds 3
# --families logistics-large,tools-large,ipc-costs`), cost / optimum median and p95:
#     LAMA's five phases                logistics-6 1.136 / 1.299, gripper-8 1.004 / 1.139, ipc-costs 1.057 / 1.269
#     without its phase 2 (lazy w A*)   logistics-6 1.004 / 1.247, gripper-8 1.000 / 1.013, ipc-costs 1.057 / 1.250
#     eager w A*, FF and landmarks      logistics-6 1.000 / 1.183, gripper-8 1.000 / 1.042, ipc-costs 1.132 / 1.269
#     eager w A*, FF (this one)         logistics-6 1.000 / 1.157, gripper-8 1.000 / 1.000, ipc-costs 1.047 / 1.269
# at the same latency (the anytime share ends all of them), logistics-large and tools-large at 1.000 for all four.
_ANYTIME = (
    "let(hlm1, eval_modify_costs(landmark_sum(lm_factory=lm_reasonable_orders_hps(lm_rhw()),pref=false),"
    "cost_type=one),let(hff1, eval_modify_costs(ff(),cost_type=one),"
    "let(hff2, eval_modify_costs(ff(),cost_type=plusone),"
    "iterated([lazy_greedy([hff1,hlm1],preferred=[hff1,hlm1],cost_type=one,reopen_closed=false),"
    + ",".join(f"eager_wastar([hff2],preferred=[hff2],w={w})" for w in (5, 3, 2, 1))
    + "],repeat_last=true))))"
)
# Diverse satisficing searches raced beside lama-first on unit-cost tasks (one per core): they differ from it in
# search (eager vs lazy) and heuristic (causal graph, context-enhanced additive, additive), the axes on which the
# IPC 2011 Stone Soup portfolio's satisficing members differ, so a task that stalls one is less likely to stall
# the others. In this order when fewer cores than configurations are available.
_EAGER_FF_CG = "let(hff, ff(), let(hcg, cg(), eager_greedy([hff, hcg], preferred=[hff, hcg])))"
_LAZY_CEA = "let(hcea, cea(), lazy_greedy([hcea], preferred=[hcea]))"
_LAZY_ADD = "let(hadd, add(), lazy_greedy([hadd], preferred=[hadd]))"
RACE_ALIASES = ("eager-ff-cg", "lazy-cea", "lazy-add")
SATISFICING = frozenset({"lama-first", *RACE_ALIASES})
# Searches whose exit with a plan proves it optimal (`anytime`): A* with an admissible heuristic, and the
# anytime search once its last phase is exhausted.
PROVING = frozenset({"anytime-wastar", "seq-opt-lmcut", "seq-opt-bjolp"})
EXACT_ALIAS = "seq-opt-lmcut"
# How a call with costs trades plan cost for time (`FastDownward(quality=...)`, `portfolio plan --quality`):
# "first" the first cost-aware plan (eager weighted A*); "anytime" improve the plan and stop on a proof of
# optimality or at a share of the budget; "optimal" stop only on a proof (or at the deadline, best plan so far).
QUALITIES = ("first", "anytime", "optimal")
DEFAULT_QUALITY = "anytime"


def check_quality(name: str) -> str:
    if name not in QUALITIES:
        raise ValueError(f"unknown quality {name!r}; expected one of: {', '.join(QUALITIES)}")
    return name


SEARCH_ALIASES = {
    "lama-first": _LAMA_FIRST,
    "eager-ff-cg": _EAGER_FF_CG,
    "lazy-cea": _LAZY_CEA,
    "lazy-add": _LAZY_ADD,
    "lama-costs": _LAMA_COSTS,
    "anytime-wastar": _ANYTIME,
    "seq-opt-lmcut": "astar(lmcut())",
    "seq-opt-bjolp": "let(lmc, landmark_cost_partitioning(lm_reasonable_orders_hps(lm_merged([lm_rhw(),lm_hm(m=1)]))),"
    "astar(lmc,lazy_evaluator=lmc))",
}


def search_binary() -> Path:
    """The `downward` search binary shipped in the up-fast-downward wheel (found without importing the package,
    whose __init__ imports unified-planning)."""
    spec = importlib.util.find_spec("up_fast_downward")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("up-fast-downward is not installed")
    binary = Path(list(spec.submodule_search_locations)[0]) / "downward" / "builds" / "release" / "bin" / "downward"
    if not binary.exists():
        raise RuntimeError(f"Fast Downward search binary not found at {binary}")
    return binary


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and `taskset` narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def search_aliases(
    alias: str,
    cost_alias: str,
    with_costs: bool,
    workers: int,
    order: Sequence[str] | None = None,
    quality: str = "first",
    exact: bool = False,
) -> list[str]:
    """The searches one call runs side by side. An optimal `alias` runs alone, costs or not. Without costs:
    `alias` plus up to `workers - 1` of `RACE_ALIASES`, first plan wins; `order` (satisficing configurations, e.g.
    a learned selection's ranking for this task's domain) goes before that fixed order, which fills the cores
    `order` leaves free. With costs, by `quality`:

    - "first": a cost-blind search for coverage (the first of `order` if given, else `alias`) and the cost-aware
      `cost_alias` whose plan is preferred;
    - "anytime" / "optimal": `anytime-wastar` (its first phase is lama-first's search: the same coverage) and, on a
      second core, A* with LM-cut when the task is small enough to prove optimality on (`exact`), else the
      selection's coverage search if it differs from lama-first, else `cost_alias`. The cheapest plan wins."""
    if alias not in SATISFICING:
        return [alias]  # an optimal configuration promised optimal plans: no satisficing search may win
    chosen = [name for name in order or () if name in SATISFICING]
    if not with_costs:
        return list(dict.fromkeys([*chosen, alias, *RACE_ALIASES]))[: max(1, workers)]
    # The coverage search is the domain's fastest to a first plan when a selection says which: under learned
    # costs every plan has costs, and the selection would otherwise never be used.
    coverage = chosen[0] if chosen else alias
    if quality == "first":
        return list(dict.fromkeys([coverage, cost_alias]))  # the same search twice would only race itself
    if workers < 2:
        return ["anytime-wastar"]
    second = EXACT_ALIAS if exact else (coverage if coverage != "lama-first" else cost_alias)
    return ["anytime-wastar", second]


def run_searches(
    pool: SearchProcessPool,
    commands: Sequence[tuple[str, tuple[str, ...]]],
    sas_text: str,
    deadline: float,
    details: AttemptDetails,
    race: bool = False,
    race_after: float | None = None,
    custom: bool = False,
    anytime: bool = False,
    improve_by: float | None = None,
    cost_scale: float = 1.0,
) -> DelegateOutcome:
    """Run one search per (alias, command) side by side, each in a process taken from `pool`. `race`: the first
    plan wins and the others are killed. `anytime` (with costs, `quality` "anytime" or "optimal"): the cheapest
    plan of any search wins, the wait ends on a proof of optimality or once a plan exists after `improve_by`
    (None: only a proof or the deadline), as `anytime` says; `cost_scale` converts the SAS task's integer
    costs back for the details. Else (with costs, "first": the cost-blind one for coverage, the cost-aware one
    for cheap plans) the last alias's plan is preferred; once an earlier one has a plan, the later ones get a
    grace period of twice the time taken so far (at least 0.2 s) instead of the whole budget. A search that exits
    without a plan never stops the others: only a plan (from the last one, unless racing), a proof, or the
    deadline does. `custom`: the command is a raw search string, reported as "custom" instead of its alias."""
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
        if anytime:
            codes, proof = fd_anytime.wait_anytime(runs, deadline, improve_by, PROVING, started_wall)
            return _anytime_outcome(runs, codes, proof, details, started_wall, cost_scale)
        codes = _wait(runs, deadline, started, race=race, race_after=race_after)
        return _outcome(runs, codes, details, custom)
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
