"""The Fast Downward delegate: the translator in a warm worker process, the search binary as a child process.

This is the driver's translate -> search pipeline without the driver: the `fast-downward.py` script pays
interpreter start-up and imports on every call, a long-lived delegate pays them once. Translations are cached
by task content and re-used for replanning from a changed state and for other action costs (see `sas.py`).
Both stages run in processes that are killed when the deadline passes, so the budget is hard.
"""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from domains.model import Atom, Task
from portfolio.results import DelegateOutcome, PlanRequest, Status
from portfolio.sas import SasTask, operator_action, parse_sas
from portfolio.workers import BudgetExpired, SearchProcessPool, WorkerCrashed, WorkerError, WorkerProcess, wait_any

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
SEARCH_ALIASES = {
    "lama-first": _LAMA_FIRST,
    "lama-costs": _LAMA_COSTS,
    "seq-opt-lmcut": "astar(lmcut())",
    "seq-opt-bjolp": "let(lmc, landmark_cost_partitioning(lm_reasonable_orders_hps(lm_merged([lm_rhw(),lm_hm(m=1)]))),"
    "astar(lmc,lazy_evaluator=lmc))",
}
# Exit codes of the search binary (Fast Downward's driver/returncodes.py).
_UNSOLVABLE_CODES = {10, 11}
_EXIT_REASONS = {
    12: "search space exhausted by an incomplete search",
    22: "search ran out of memory",
    32: "search critical error",
    33: "search input error",
    34: "configuration not supported for this task",
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


@dataclass(frozen=True)
class Translation:
    init: frozenset[Atom]  # the initial state this translation was made from
    sas: SasTask | None  # None when the translator proved the task unsolvable
    translate_ms: float


def structure_key(task: Task) -> tuple:
    """What a translation depends on besides the initial state."""
    problem = task.problem
    return (task.domain_pddl or task.domain, problem.objects, problem.numeric_init, problem.goal)


class FastDownward:
    """Delegate running Fast Downward with `alias` (or a raw `search` string) on tasks with unit costs and
    `cost_alias` on tasks with action costs or learned costs."""

    def __init__(
        self,
        alias: str = "lama-first",
        search: str | None = None,
        cost_alias: str = "lama-costs",
        budget_s: float | None = None,
        cache_size: int = 64,
        name: str = "fast-downward",
    ) -> None:
        for wanted in (alias, cost_alias):
            if wanted not in SEARCH_ALIASES:
                raise ValueError(f"unknown Fast Downward alias {wanted!r}; known: {', '.join(SEARCH_ALIASES)}")
        self.name = name
        self.budget_s = budget_s
        self.alias = alias
        self.search = search
        self.cost_alias = cost_alias
        self.cache_size = cache_size
        self._binary = str(search_binary())
        self._translations: OrderedDict[tuple, Translation] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._worker: WorkerProcess | None = None
        self._searches = SearchProcessPool()
        self.translations = 0  # translator runs so far: what the cache saves is visible

    # -- translation ------------------------------------------------------------------------------------
    def _translator(self) -> WorkerProcess:
        if self._worker is None:
            self._worker = WorkerProcess(preload=("translate",))
        return self._worker

    def warm_up(self) -> None:
        """Start the translator worker and a search process now, so the first call does not pay for them."""
        self._translator()
        self._searches.prestart(self._command(self.alias))

    def translate(self, request: PlanRequest, deadline: float) -> tuple[Translation, tuple[int, ...] | None]:
        """The cached translation for the request's task and, when it was made from another initial state, the
        SAS initial values for the request's state. Translates (under the deadline) when nothing cached fits."""
        key = structure_key(request.task)
        init = request.initial_state
        with self._cache_lock:
            cached = self._translations.get(key)
            if cached is not None:
                self._translations.move_to_end(key)
        if cached is not None and cached.sas is not None:
            if cached.init == init:
                return cached, None
            values = cached.sas.with_init(cached.init, init)
            if values is not None:
                return cached, values
        task = request.effective_task()
        self.translations += 1
        start = time.monotonic()
        answer = self._translator().call(
            "translate", deadline, domain_pddl=task.domain_pddl, problem_pddl=task.problem_pddl
        )
        translation = Translation(
            init=init,
            sas=None if answer["unsolvable"] else parse_sas(answer["sas"]),
            translate_ms=(time.monotonic() - start) * 1000,
        )
        with self._cache_lock:
            self._translations[key] = translation
            while len(self._translations) > self.cache_size:
                self._translations.popitem(last=False)
        return translation, None

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
        except WorkerError as error:
            return DelegateOutcome(Status.ERROR, reason=f"translator failed: {error}")
        except WorkerCrashed as error:
            return DelegateOutcome(Status.ERROR, reason=f"translator crashed: {error}")
        details = {"translate_ms": round(translation.translate_ms, 3), "translation_reused": init_values is not None}
        if translation.sas is None:
            return DelegateOutcome(Status.UNSOLVABLE, reason="translator: goal not relaxed-reachable", details=details)
        costs = None
        if request.has_costs:
            costs = request.grounded_costs([f"({name})" for name in translation.sas.operator_names])
        sas_text = translation.sas.render(init=init_values, costs=costs, excluded=request.excluded)
        return self.search_sas(sas_text, deadline, with_costs=bool(costs) or task.has_action_costs(),
                               details=details)

    def search_sas(self, sas_text: str, deadline: float, with_costs: bool = False,
                   details: dict | None = None) -> DelegateOutcome:
        """Search a SAS task (e.g. a cached translation with another goal or state swapped in) with this
        delegate's configuration, pre-started processes and deadline handling."""
        aliases = [self.alias, self.cost_alias] if with_costs and not self.search else [self.alias]
        return self._search(sas_text, aliases, deadline, {} if details is None else details)

    def _search(self, sas_text: str, aliases: list[str], deadline: float, details: dict) -> DelegateOutcome:
        """Run one search per alias side by side (two cores: the cost-blind one for coverage, the cost-aware one
        for cheap plans). The last alias's plan is preferred; once an earlier one has a plan, the later ones get
        a grace period of twice the time taken so far (at least 0.2 s) instead of the whole budget."""
        started = time.monotonic()
        runs = [(alias, self._searches.take(self._command(alias))) for alias in aliases]
        try:
            for _, run in runs:
                _feed(run.process, sas_text)
            finish_by = deadline
            codes: dict[str, int] = {}
            while len(codes) < len(runs):
                for alias, run in runs:
                    if alias not in codes and run.process.poll() is not None:
                        codes[alias] = run.process.returncode
                if aliases[-1] in codes or len(codes) == len(runs):
                    break
                now = time.monotonic()
                if any(code == 0 for code in codes.values()):
                    finish_by = min(finish_by, now + max(0.2, 2 * (now - started)))
                if now >= finish_by:
                    break
                wait_any([run.process for alias, run in runs if alias not in codes], finish_by - now)
            return self._outcome(runs, codes, details)
        finally:
            for _, run in runs:
                self._searches.release(run)

    def _outcome(self, runs, codes: dict[str, int], details: dict) -> DelegateOutcome:
        for alias, run in reversed(runs):
            if codes.get(alias) == 0:
                details["search"] = "custom" if self.search else alias
                return DelegateOutcome(Status.SOLVED, plan=_read_plan(Path(run.plan_path)), details=details)
        for alias, _ in runs:
            if codes.get(alias) in _UNSOLVABLE_CODES:
                details["search"] = alias
                return DelegateOutcome(Status.UNSOLVABLE, reason="search proved the task unsolvable", details=details)
        failures = []
        for alias, run in runs:
            code = codes.get(alias)
            if code is not None:
                reason = _EXIT_REASONS.get(code, f"search exited with code {code}")
                failures.append(f"{alias}: {reason}: {_tail(Path(run.output_path))}")
        if len(failures) == len(runs):
            return DelegateOutcome(Status.ERROR, reason="; ".join(failures), details=details)
        return DelegateOutcome(Status.TIMEOUT, reason="budget expired during search", details=details)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._searches.close()


def _feed(process: subprocess.Popen, text: str) -> None:
    """Hand the task to a waiting search process. The search reads all of its input before it starts, so this
    does not block for long; a process that died early just gets a closed pipe."""
    assert process.stdin is not None
    try:
        process.stdin.write(text.encode())
        process.stdin.close()
    except BrokenPipeError:
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

