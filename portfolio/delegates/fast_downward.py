"""The Fast Downward delegate: the translator in a warm worker process, the search binary as a child process.

This is the driver's translate -> search pipeline without the driver: the `fast-downward.py` script pays
interpreter start-up and imports on every call, a long-lived delegate pays them once. Translations are cached
by task content and re-used for replanning from a changed state and for other action costs (see `sas.py`);
with a `SasCache` (`portfolio.sas_cache`) they also survive the process: a task translated by any process
before is read from disk instead (the attempt's `details["translation"]` says "disk"). A replan on a small unit-cost
task (translation reused, init rewritten) is first searched in this process (`portfolio.sas_search`, no process:
`details["search"]` says "in-process"); when that finds nothing, the process search runs in what is left.
Both stages run in processes that are killed when the deadline passes, so the budget is hard; handing the SAS
task to a search process is bounded by the same deadline.

The cascade may carry this delegate's work over past its share (`carries_over`, see `portfolio.cascade`): it
then runs on another thread beside the decomposer tier, which shares it. So a translation under way is made
once (a second caller waits for it), and every wait also ends when the thread's stop signal is set
(`portfolio.cancel`). The decomposer's subgoal searches still race `workers` searches beside the carried-over
ones: capping all calls together at one search per core was tried and lost (citycar p3-2-2-0-1: the goal
agenda's first subgoal took lama-first alone > 5 s, the race's eager-ff-cg 0.23 s).

Exit codes go through `fd_exitcodes` (named as in Fast Downward's driver): when several searches run side by
side, one `aggregate` over the ones that ran decides the outcome, and a search that fails early never cuts
short another one that is still working.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import select
import subprocess
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from domains.model import Atom, Task
from portfolio import cancel
from portfolio.delegates import fd_exitcodes
from portfolio.results import DelegateOutcome, PlanRequest, Resource, Status
from portfolio.sas import SasTask, operator_action, parse_sas
from portfolio.sas_cache import CachedTranslation, SasCache, cache_key
from portfolio.sas_search import compile_task, greedy_search
from portfolio.workers import (
    BudgetExpired, OutOfMemory, SearchProcessPool, WorkerCrashed, WorkerError, WorkerProcess, wait_any,
)

log = logging.getLogger(__name__)

_LAMA_FIRST = (
    "let(hlm, eval_modify_costs(landmark_sum(lm_factory=lm_reasonable_orders_hps(lm_rhw()),pref=false),"
    "cost_type=one),let(hff, eval_modify_costs(ff(),cost_type=one),"
    "lazy_greedy([hff,hlm],preferred=[hff,hlm],cost_type=one,reopen_closed=false)))"
)
# Cost-sensitive: LAMA's heuristics on real costs (plus one, so zero-cost actions still count) in an eager
# weighted A*. Eager, not lazy as in LAMA: lazy search scores a successor by its parent's estimate, so on a
# task where one expensive action reaches the goal directly it takes that action (measured: cost 100 vs 3).
_LAMA_COSTS = (
    "let(hlm, eval_modify_costs(landmark_sum(lm_factory=lm_reasonable_orders_hps(lm_rhw()),pref=false),"
    "cost_type=plusone),let(hff, eval_modify_costs(ff(),cost_type=plusone),"
    "eager_wastar([hff,hlm],preferred=[hff,hlm],w=3)))"
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
SEARCH_ALIASES = {
    "lama-first": _LAMA_FIRST,
    "eager-ff-cg": _EAGER_FF_CG,
    "lazy-cea": _LAZY_CEA,
    "lazy-add": _LAZY_ADD,
    "lama-costs": _LAMA_COSTS,
    "seq-opt-lmcut": "astar(lmcut())",
    "seq-opt-bjolp": "let(lmc, landmark_cost_partitioning(lm_reasonable_orders_hps(lm_merged([lm_rhw(),lm_hm(m=1)]))),"
    "astar(lmc,lazy_evaluator=lmc))",
}


# In-process search on replans (`portfolio.sas_search`): only for tasks with at most this many operators. Measured
# on 2 cores, from the initial state: pure-Python GBFS+hFF solves the IPC tasks of `portfolio.bench` (4-72
# operators) in 0.1-7 ms plus ~0.5 ms to compile, where a whole perturbed replan through a `downward` process took
# 9-12 ms (`benchmarks.bench_reuse`); at 156-180 operators (logistics00 8-0, depot p02) it took 21-28 ms, slower
# than the process, since hFF costs O(operators) per state in Python. 120 sits between the two.
INPROCESS_MAX_OPERATORS = 120
# The in-process search stops after this long (or at the deadline): the process search gets what is left.
INPROCESS_BUDGET_S = 0.1
INPROCESS_NODE_CAP = 20_000


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


@dataclass(frozen=True)
class Translation:
    init: frozenset[Atom]  # the initial state this translation was made from
    sas: SasTask | None  # None when the translator proved the task unsolvable
    translate_ms: float
    source: str = "translated"  # for this call: "translated", "memory" (this process) or "disk" (SasCache)


def structure_key(task: Task) -> tuple:
    """What a translation depends on besides the initial state."""
    problem = task.problem
    return (task.domain_pddl or task.domain, problem.objects, problem.numeric_init, problem.goal)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and `taskset` narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def search_aliases(alias: str, cost_alias: str, with_costs: bool, workers: int,
                   order: Sequence[str] | None = None) -> list[str]:
    """The searches one call runs side by side. An optimal `alias` runs alone, costs or not. With costs: the
    cost-blind `alias` for coverage and the cost-aware `cost_alias` whose plan is preferred. Without: `alias`
    plus up to `workers - 1` of `RACE_ALIASES`, first plan wins; `order` (satisficing configurations, e.g. a
    learned selection's ranking for this task's domain) goes before that fixed order, which fills the cores
    `order` leaves free."""
    if alias not in SATISFICING:
        return [alias]  # an optimal configuration promised optimal plans: no satisficing search may win
    if with_costs:
        # Not A* as well on small tasks: optimal plans under learned costs succeeded less often in the tools
        # world (seeds 0-2, last 50 of 200 episodes: learned 0.64-0.72 vs 0.73-0.76 with weighted A* alone),
        # since an optimal search also finds the groundings whose failure is most underestimated.
        return list(dict.fromkeys([alias, cost_alias]))  # the same search twice would only race itself
    chosen = [name for name in order or () if name in SATISFICING]
    return list(dict.fromkeys([*chosen, alias, *RACE_ALIASES]))[: max(1, workers)]


class FastDownward(Resource):
    """Delegate running Fast Downward with `alias` (or a raw `search` string) on tasks with unit costs and
    `cost_alias` on tasks with action costs or learned costs.

    `workers` (default: the cores available): on unit-cost tasks, after the one translation, `alias` and up to
    `workers - 1` diverse searches (`RACE_ALIASES`) run at once; the first plan wins and the rest are killed.
    `workers=1` runs `alias` alone. A raw `search` string always runs alone.

    `selector` (settable later; `Planner(traces=...)` sets it from a learned selection model): called after
    translation with the task and its SAS task, it returns the satisficing configurations to race in order
    (`search_aliases`' `order`), or None for the fixed order. Attempts record the SAS task's size
    (`details["sas"]`) and which configurations raced (`details["searches"]`) and won (`details["search"]`):
    what the selection is learned from."""

    source = "classical"
    carries_over = True  # the cascade may let its work go on past its share (`portfolio.cascade`)

    def __init__(
        self,
        alias: str = "lama-first",
        search: str | None = None,
        cost_alias: str = "lama-costs",
        budget_s: float | None = None,
        cache_size: int = 64,
        name: str = "fast-downward",
        disk_cache: SasCache | None = None,
        workers: int | None = None,
    ) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"Fast Downward workers must be at least 1, got {workers}")
        for wanted in (alias, cost_alias):
            if wanted not in SEARCH_ALIASES:
                raise ValueError(f"unknown Fast Downward alias {wanted!r}; known: {', '.join(SEARCH_ALIASES)}")
        self.name = name
        self.budget_s = budget_s
        self.alias = alias
        self.search = search
        self.cost_alias = cost_alias
        self.cache_size = cache_size
        self.disk_cache = disk_cache
        self.workers = workers or available_cores()
        self.selector: Callable[[Task, SasTask], Sequence[str] | None] | None = None
        self._binary = str(search_binary())
        self._translations: OrderedDict[tuple, Translation] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._pending: dict[tuple, threading.Event] = {}  # translations under way, so two threads make one
        self._worker: WorkerProcess | None = None
        self._searches = SearchProcessPool()
        self.inprocess_max_operators = INPROCESS_MAX_OPERATORS
        self.inprocess_node_cap = INPROCESS_NODE_CAP
        self.translations = 0  # translator runs so far: what the cache saves is visible

    # -- translation ------------------------------------------------------------------------------------
    def _translator(self) -> WorkerProcess:
        if self._worker is None:
            self._worker = WorkerProcess(preload=("translate",))
        return self._worker

    def supports(self, task: Task) -> bool:
        """Everything the task model reads: the translator takes ADL, costs and more than this project parses."""
        return True

    def warm_up(self) -> None:
        """Start the translator worker and a search process now, so the first call does not pay for them."""
        self._translator()
        aliases = self._aliases(with_costs=False)
        if self.selector is not None and not self.search and self.alias in SATISFICING:
            aliases = [*aliases, *(name for name in RACE_ALIASES if name not in aliases)]  # any may be chosen
        for alias in aliases:
            self._searches.prestart(self._command(alias))

    def translate(self, request: PlanRequest, deadline: float) -> tuple[Translation, tuple[int, ...] | None]:
        """The cached translation for the request's task and, when it was made from another initial state, the
        SAS initial values for the request's state. Translates (under the deadline) when nothing cached fits."""
        key = structure_key(request.task)
        init = request.initial_state
        while True:
            found = self._cached(key, init)
            if found is not None:
                return found
            with self._cache_lock:
                running = self._pending.get(key)
                mine = running is None
                if mine:
                    running = self._pending[key] = threading.Event()
            if mine:
                break
            # Another thread (work carried over from the classical tier) is translating this task: wait for its
            # translation instead of making a second one, then look again (if it failed, translate here).
            while not running.wait(max(0.0, min(0.05, deadline - time.monotonic()))):
                if cancel.expired(deadline):
                    raise BudgetExpired()
        try:
            return self._translate(key, request, deadline), None
        finally:
            with self._cache_lock:
                self._pending.pop(key, None)
            running.set()

    def _cached(self, key: tuple, init: frozenset[Atom]) -> tuple[Translation, tuple[int, ...] | None] | None:
        with self._cache_lock:
            cached = self._translations.get(key)
            if cached is not None:
                self._translations.move_to_end(key)
        if cached is not None and cached.sas is not None:
            if cached.init == init:
                return replace(cached, source="memory"), None
            values = cached.sas.with_init(cached.init, init)
            if values is not None:
                return replace(cached, source="memory"), values
        return None

    def _translate(self, key: tuple, request: PlanRequest, deadline: float) -> Translation:
        init = request.initial_state
        task = request.effective_task()
        start = time.monotonic()
        disk_key = cache_key(task.domain_pddl, task.problem_pddl) if self.disk_cache is not None else ""
        translation = self._from_disk(disk_key, init, start)
        if translation is None:
            self.translations += 1
            answer = self._translator().call(
                "translate", deadline, domain_pddl=task.domain_pddl, problem_pddl=task.problem_pddl
            )
            translation = Translation(
                init=init,
                sas=None if answer["unsolvable"] else parse_sas(answer["sas"]),
                translate_ms=(time.monotonic() - start) * 1000,
            )
            if self.disk_cache is not None:
                self.disk_cache.put(disk_key, CachedTranslation(answer["sas"], bool(answer["unsolvable"])))
        with self._cache_lock:
            self._translations[key] = translation
            while len(self._translations) > self.cache_size:
                self._translations.popitem(last=False)
        return translation

    def _from_disk(self, key: str, init: frozenset[Atom], start: float) -> Translation | None:
        """The translation stored under `key` in the disk cache, or None (no cache, a miss, or an entry that
        does not parse: that one is removed, so the fresh translation rewrites it)."""
        if self.disk_cache is None:
            return None
        entry = self.disk_cache.get(key)
        if entry is None:
            return None
        try:
            sas = None if entry.unsolvable else parse_sas(entry.sas)
        except (ValueError, IndexError) as error:
            log.warning("translation cache entry %s does not parse (%s): translating again", key, error)
            self.disk_cache.corrupt += 1
            self.disk_cache.path(key).unlink(missing_ok=True)
            return None
        return Translation(init=init, sas=sas, translate_ms=(time.monotonic() - start) * 1000, source="disk")

    def grounded_actions(self, request: PlanRequest, deadline: float) -> list[str]:
        """Every grounded action the translator kept, in PDDL form: what learned costs are computed for."""
        translation, _ = self.translate(request, deadline)
        return [] if translation.sas is None else [f"({name})" for name in translation.sas.operator_names]

    # -- search -----------------------------------------------------------------------------------------
    def _command(self, alias: str) -> tuple[str, ...]:
        return (self._binary, "--search", self.search or SEARCH_ALIASES[alias])

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        task = request.task
        try:
            translation, init_values = self.translate(request, deadline)
        except BudgetExpired:
            return DelegateOutcome(Status.TIMEOUT, reason="budget expired during translation")
        except OutOfMemory as error:
            return DelegateOutcome(Status.MEMOUT, reason=f"translator: {error}")
        except WorkerError as error:
            return DelegateOutcome(Status.ERROR, reason=f"translator failed: {error}")
        except WorkerCrashed as error:
            return DelegateOutcome(Status.ERROR, reason=f"translator crashed: {error}")
        details = {"translate_ms": round(translation.translate_ms, 3), "translation": translation.source,
                   "translation_reused": init_values is not None}
        if translation.sas is None:
            return DelegateOutcome(Status.UNSOLVABLE, reason="translator: goal not relaxed-reachable", details=details)
        details["sas"] = {"variables": len(translation.sas.values), "operators": len(translation.sas.operators)}
        costs = None
        if request.has_costs:
            costs = request.grounded_costs([f"({name})" for name in translation.sas.operator_names])
        if init_values is not None and not costs and not task.has_action_costs():
            solved = self._search_in_process(translation.sas, init_values, request.excluded, deadline, details)
            if solved is not None:
                return solved
        with_costs = bool(costs) or task.has_action_costs()
        order = None
        if self.selector is not None and not with_costs:
            order = self.selector(task, translation.sas)
            details["selection"] = "learned" if order else "fixed"
        sas_text = translation.sas.render(init=init_values, costs=costs, excluded=request.excluded)
        # Work carried over past its share (`request.answer_by`): the caller is already waiting, so the first plan
        # wins, as in the decomposer tier; learned costs (failure risk) keep the cost-aware plan's preference.
        race_after = request.answer_by if not costs else None
        return self.search_sas(sas_text, deadline, with_costs=with_costs, details=details, order=order,
                               race_after=race_after)

    def _search_in_process(self, sas: SasTask, init: tuple[int, ...], excluded: frozenset[str], deadline: float,
                           details: dict) -> DelegateOutcome | None:
        """A replan on a small unit-cost task (translation reused, init rewritten): GBFS+hFF in this process, no
        search process. The plan, or None (after recording why in `details["in_process"]`) so the process search
        runs within what is left of the budget. Only for satisficing configurations: an optimal one promised
        optimal plans."""
        if self.search or self.alias not in SATISFICING or len(sas.operators) > self.inprocess_max_operators:
            return None
        started = time.monotonic()
        problem = compile_task(sas, excluded)
        if problem is None:
            details["in_process"] = {"status": "unsupported", "reason": "axioms"}
            return None
        result = greedy_search(problem, init, min(deadline, started + INPROCESS_BUDGET_S),
                               node_cap=self.inprocess_node_cap)
        details["in_process"] = {"status": result.status.value, "expanded": result.expanded,
                                 "ms": round((time.monotonic() - started) * 1000, 3)}
        if result.status is not Status.SOLVED or result.plan is None:
            return None
        details["search"] = "in-process"
        return DelegateOutcome(Status.SOLVED, plan=[operator_action(name) for name in result.plan], details=details)

    def search_sas(self, sas_text: str, deadline: float, with_costs: bool = False,
                   details: dict | None = None, order: Sequence[str] | None = None,
                   race_after: float | None = None) -> DelegateOutcome:
        """Search a SAS task (e.g. a cached translation with another goal or state swapped in) with this
        delegate's configuration (or the configurations `order` chooses), pre-started processes and deadline
        handling. After `race_after` (a monotonic time) any plan ends the wait, as in a race."""
        if cancel.expired(deadline):  # no search process is taken (and killed) for nothing
            return DelegateOutcome(Status.TIMEOUT, reason="budget expired before the search", details=details or {})
        aliases = self._aliases(with_costs, order)
        race = not with_costs and len(aliases) > 1
        details = {} if details is None else details
        if with_costs:
            details["costs"] = True  # the cost-aware pair ran: no evidence for configuration selection
        return self._search(sas_text, aliases, deadline, details, race=race, race_after=race_after)

    def _aliases(self, with_costs: bool, order: Sequence[str] | None = None) -> list[str]:
        if self.search:
            return [self.alias]
        return search_aliases(self.alias, self.cost_alias, with_costs, self.workers, order)

    def _search(self, sas_text: str, aliases: list[str], deadline: float, details: dict,
                race: bool = False, race_after: float | None = None) -> DelegateOutcome:
        """Run one search per alias side by side. `race`: the first plan wins and the others are killed. Else
        (with costs: the cost-blind one for coverage, the cost-aware one for cheap plans) the last alias's plan
        is preferred; once an earlier one has a plan, the later ones get a grace period of twice the time taken
        so far (at least 0.2 s) instead of the whole budget. A search that exits without a plan never stops
        the others: only a plan (from the last one, unless racing), a proof, or the deadline does."""
        started = time.monotonic()
        runs = [(alias, self._searches.take(self._command(alias))) for alias in aliases]
        try:
            data = sas_text.encode()
            for _, run in runs:
                if not _feed(run.process, data, deadline):
                    return DelegateOutcome(Status.TIMEOUT, reason="budget expired while handing the task to the "
                                           "search", details=details)
            codes = _wait(runs, deadline, started, race=race, race_after=race_after)
            return self._outcome(runs, codes, details)
        finally:
            for _, run in runs:
                self._searches.release(run)

    def _outcome(self, runs, codes: dict[str, int | None], details: dict) -> DelegateOutcome:
        """One verdict over the searches that ran (`fd_exitcodes.aggregate`)."""
        label = (lambda alias: "custom") if self.search else (lambda alias: alias)
        details["searches"] = {label(alias): fd_exitcodes.meaning(code) for alias, code in codes.items()}
        verdict = fd_exitcodes.aggregate(codes)
        if verdict.status is Status.SOLVED:
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

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._searches.close()


def _wait(runs, deadline: float, started: float, race: bool = False,
          race_after: float | None = None) -> dict[str, int | None]:
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
                view = view[os.write(fd, view[:1 << 16]):]
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

