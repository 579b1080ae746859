"""The Fast Downward delegate: the translator in a warm worker process, the search binary as a child process.

`FastDownward(...)` (a `Delegate`; its settings in the class docstring) answers `solve(request, deadline)` ->
`DelegateOutcome`: translate the task (cached by content, in memory and on disk: `translations`, `sas_cache`;
reused for replanning from a changed state and for other action costs: `sas`), decide the call's
`search_plan.SearchPlan` once, search in this process when the plan says so
(`portfolio.delegates.fast_downward.inprocess`, answered as "fd-inprocess"), then in `downward` processes within
what is left (`searches`, `search_run`). `search_sas(...)` searches an already translated SAS task (the goal
agenda's shared translation). A budget spent in translation or search is a `timeout` outcome; the processes are
killed at the deadline, so the budget is hard, and handing the SAS task to a search process is bounded by the
same deadline.

Why: this is the driver's translate -> search pipeline without the driver; the `fast-downward.py` script pays
interpreter start-up and imports on every call, a long-lived delegate pays them once.

The cascade may carry this delegate's work over past its share (`carries_over`, `portfolio.engine.cascade`): it
then runs on another thread beside the decomposer tier, which shares it. So a translation under way is made once
(a second caller waits for it: `translations`), and every wait also ends when the thread's stop signal is set
(`portfolio.engine.cancel`). The decomposer's subgoal searches race `workers` searches beside the carried-over ones,
not one search per core for all calls together (`docs/decisions/search-race-per-call.md`).

    delegate = FastDownward()
    outcome = delegate.solve(PlanRequest(task=task), time.monotonic() + 1.0)
    delegate.close()"""

from __future__ import annotations

from collections.abc import Sequence

from domains.model import Task
from portfolio.delegates.fast_downward import inprocess as fd_inprocess
from portfolio.delegates.fast_downward.sas_cache import SasCache
from portfolio.delegates.fast_downward.search_plan import (
    EXACT_MAX_OPERATORS,
    IMPROVE_SHARE,
    INPROCESS_MAX_OPERATORS,
    INPROCESS_NODE_CAP,
    SearchPlan,
    Settings,
    plan_call,
    plan_sas,
    translator_options,
)
from portfolio.delegates.fast_downward.search_run import command, run_searches
from portfolio.delegates.fast_downward.searches import DEFAULT_QUALITY, RACE_ALIASES, available_cores
from portfolio.delegates.fast_downward.translate import PRELOAD, check_options
from portfolio.delegates.fast_downward.translations import Translation, Translations
from portfolio.engine import cancel
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from portfolio.engine.search_pool import SearchProcessPool
from portfolio.engine.workers import BudgetExpired, OutOfMemory, WorkerCrashed, WorkerError, WorkerProcess
from traces.attempt_details import AttemptDetails


class FastDownward(Delegate):
    """Delegate running Fast Downward with `alias` (or a raw `search` string) on tasks with unit costs and
    `cost_alias` on tasks with action costs or learned costs. Its configuration is fixed when it is made
    (`settings`, a frozen `search_plan.Settings`); what one call runs is its `search_plan.SearchPlan`, decided
    once per call from the settings and the request.

    `workers` (default: the cores available): on unit-cost tasks, after the one translation, `alias` and up to
    `workers - 1` diverse searches (`RACE_ALIASES`) run at once; the first plan wins and the rest are killed.
    `workers=1` runs `alias` alone. A raw `search` string always runs alone.

    A request's `selection` (`PlanRequest.selection`: the Planner's learned selection model, with a trace store)
    gives, after translation, the satisficing configurations to race in order (`search_aliases`' `order`), or
    None for the fixed order. Attempts record the SAS task's size (`details["sas"]`) and which configurations
    raced (`details["searches"]`) and won (`details["search"]`): what the selection is learned from.

    `translate_options` (translator flags, `portfolio.delegates.fast_downward.translate.check_options`): every task
    is translated with them. None (the default): the driver's defaults, unless the request's `selection` gives
    options for the task, chosen BEFORE translation. Attempts record the options used (`details["translator"]`);
    both caches key on them, so a translation made with one option set is never handed to a call that asked for
    another.

    `quality` (tasks with costs, the task's own or learned; `searches.QUALITIES`): "anytime" (the default)
    returns the cheapest plan found once optimality is proved or `improve_share` of the time left has passed
    with a plan in hand; "optimal" waits for a proof (or the deadline); "first" returns the first cost-aware plan.
    A* with LM-cut races beside the anytime search on tasks of at most `exact_max_operators` operators. The
    attempt's details record every plan found (`details["plans"]`: search, cost, ms) and `details["optimal"]`.

    Small tasks (at most `inprocess_max_operators` operators) are searched in this process first
    (`portfolio.delegates.fast_downward.inprocess`, at most `inprocess_node_cap` states); a plan found there is
    answered under the name `inprocess.INPROCESS_NAME`, not this delegate's: no Fast Downward search found it."""

    source = "classical"
    carries_over = True  # the cascade may let its work go on past its share (`portfolio.engine.cascade`)
    share = 4.0  # of the classical tier's budget, pyperplan's 1 (`portfolio.delegates.registry`)

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
        translate_options: Sequence[str] | None = None,
        quality: str = DEFAULT_QUALITY,
        improve_share: float = IMPROVE_SHARE,
        exact_max_operators: int = EXACT_MAX_OPERATORS,
        inprocess_max_operators: int = INPROCESS_MAX_OPERATORS,
        inprocess_node_cap: int = INPROCESS_NODE_CAP,
    ) -> None:
        # A test or benchmark that wants another configuration replaces `settings` as a whole (it is frozen).
        self.settings = Settings(
            alias=alias,
            search=search,
            cost_alias=cost_alias,
            workers=available_cores() if workers is None else workers,  # 0 or less: `check` refuses it
            translate_options=None if translate_options is None else check_options(translate_options),
            quality=quality,
            improve_share=improve_share,
            exact_max_operators=exact_max_operators,
            inprocess_max_operators=inprocess_max_operators,
            inprocess_node_cap=inprocess_node_cap,
        ).check()
        self.name = name
        self.budget_s = budget_s
        self._translator_worker: WorkerProcess | None = None
        self._memory = Translations(self._translator, cache_size, disk_cache)
        self._searches = SearchProcessPool()

    # -- translation ------------------------------------------------------------------------------------
    def _translator(self) -> WorkerProcess:
        """The translator worker (`translate.PRELOAD` imported at its start), started on first use."""
        if self._translator_worker is None:
            self._translator_worker = WorkerProcess(preload=PRELOAD)
        return self._translator_worker

    def supports(self, task: Task) -> bool:
        """Everything the task model reads: the translator takes ADL, costs and more than this project parses."""
        return True

    def warm_up(self) -> None:
        """Start the translator worker and a search process for each search a call may run first, so the first
        call does not pay for them."""
        self._translator()
        self.prestart(self.warm_searches())

    def warm_searches(self) -> list[str]:
        """The searches `warm_up` starts a process for: a unit-cost call's, and unless a raw search string runs
        alone, those a call with costs runs at the delegate's quality, small task or not."""
        searches = list(plan_sas(self.settings, with_costs=False).searches)
        if not self.settings.search:
            for exact in (True, False):
                searches += plan_sas(self.settings, with_costs=True, exact=exact).searches
        return searches

    def prestart(self, searches: Sequence[str]) -> None:
        """Start a search process for each of `searches` (aliases) not started yet (`SearchProcessPool`)."""
        for alias in searches:
            self._searches.prestart(command(alias, self.settings.search))

    def prestart_selectable(self) -> None:
        """Start a search process for every configuration a learned selection may put in a race (the Planner
        calls it whenever it loads a selection model, once warmed): a satisficing alias only, since an optimal one
        runs alone. A configuration with a process ready gets no second one, so calling it again is cheap."""
        if self.settings.satisficing:
            self.prestart(RACE_ALIASES)

    def translate(self, request: PlanRequest, deadline: float) -> tuple[Translation, tuple[int, ...] | None]:
        """The translation for the request's task (cached, or made under the deadline) and, when it was made from
        another initial state, the SAS initial values for the request's state (`translations.Translations`). The
        translator flags are the settings', else the request's selection's (`search_plan.translator_options`)."""
        return self._memory.get(request, deadline, translator_options(self.settings, request))

    def forget_translations(self) -> None:
        """Forget the translations kept in memory (the disk cache stays): a benchmark of the first plan then
        measures translation again."""
        self._memory.clear()

    @property
    def translations(self) -> int:
        """Translator runs so far: what the caches save is visible."""
        return self._memory.translations

    def grounded_actions(self, request: PlanRequest, deadline: float) -> list[str]:
        """Every grounded action the translator kept, in PDDL form: what learned costs are computed for."""
        translation, _ = self.translate(request, deadline)
        return [] if translation.sas is None else [f"({name})" for name in translation.sas.operator_names]

    # -- search -----------------------------------------------------------------------------------------
    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        """Translate (cached), decide the call's `SearchPlan` (`search_plan.plan_call`), search in this process
        when the plan says so, then in `downward` processes within what is left of `deadline`."""
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
        details: AttemptDetails = {
            "translate_ms": round(translation.translate_ms, 3),
            "translation": translation.source,
            "translation_reused": init_values is not None,
            "translator": list(translation.options),
        }
        if translation.sas is None:
            return DelegateOutcome(Status.UNSOLVABLE, reason="translator: goal not relaxed-reachable", details=details)
        details["sas"] = {"variables": len(translation.sas.values), "operators": len(translation.sas.operators)}
        costs = None
        if request.has_costs:
            costs = request.grounded_costs([f"({name})" for name in translation.sas.operator_names])
        plan = plan_call(self.settings, request, translation, init_values is not None, costs)
        init = init_values or translation.sas.init
        if plan.inprocess is not None:
            solved = fd_inprocess.search(plan, translation.sas, init, deadline, details)
            if solved is not None:
                return solved
        if plan.selection is not None:
            details["selection"] = plan.selection
        sas_text = translation.sas.render(init=init_values, costs=costs, excluded=request.excluded)
        return self.search_sas(sas_text, deadline, plan, details)

    def search_sas(
        self, sas_text: str, deadline: float, plan: SearchPlan | None = None, details: AttemptDetails | None = None
    ) -> DelegateOutcome:
        """Search a SAS task (e.g. a cached translation with another goal or state swapped in) as `plan` says
        (None: `search_plan.plan_sas` for a unit-cost task), in pre-started processes, under `deadline`."""
        details = AttemptDetails() if details is None else details
        if cancel.expired(deadline):  # no search process is taken (and killed) for nothing
            return DelegateOutcome(Status.TIMEOUT, reason="budget expired before the search", details=details)
        plan = plan or plan_sas(self.settings, with_costs=False)
        if plan.with_costs:
            details["costs"] = True  # the cost-aware searches ran: no evidence for configuration selection
            details["quality"] = plan.quality
        return run_searches(self._searches, plan, sas_text, deadline, details)

    def plan_sas(self, with_costs: bool, quality: str | None = None) -> SearchPlan:
        """The search plan for a SAS task searched on its own with this delegate's settings
        (`search_plan.plan_sas`)."""
        return plan_sas(self.settings, with_costs, quality)

    def close(self) -> None:
        if self._translator_worker is not None:
            self._translator_worker.close()
            self._translator_worker = None
        self._searches.close()
