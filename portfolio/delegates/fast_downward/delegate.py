"""The Fast Downward delegate: the translator in a warm worker process, the search binary as a child process.

This is the driver's translate -> search pipeline without the driver: the `fast-downward.py` script pays
interpreter start-up and imports on every call, a long-lived delegate pays them once. Translations are cached
by task content, in memory and on disk, and re-used for replanning from a changed state and for other action
costs (`translations`, `sas.py`). A replan on a small unit-cost task (translation reused, init rewritten) is
first searched in this process (`portfolio.delegates.fast_downward.sas_search`, no process: `details["search"]`
says "in-process"); when that finds nothing, the process search runs in what is left.
Both stages run in processes that are killed when the deadline passes, so the budget is hard; handing the SAS
task to a search process is bounded by the same deadline.

The cascade may carry this delegate's work over past its share (`carries_over`, see `portfolio.engine.cascade`): it
then runs on another thread beside the decomposer tier, which shares it. So a translation under way is made
once (a second caller waits for it: `translations`), and every wait also ends when the thread's stop signal is
set (`portfolio.engine.cancel`). The decomposer's subgoal searches still race `workers` searches beside the carried-over
ones: capping all calls together at one search per core was tried and lost (citycar p3-2-2-0-1: the goal
agenda's first subgoal took lama-first alone > 5 s, the race's eager-ff-cg 0.23 s).

Which searches run, and running them as `downward` processes, is `searches` (the driver's own split between
translate, search and portfolio): this module decides when to search and with what SAS task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from domains.model import Task
from portfolio.delegates.fast_downward import inprocess as fd_inprocess
from portfolio.delegates.fast_downward.inprocess import INPROCESS_MAX_OPERATORS, INPROCESS_NODE_CAP
from portfolio.delegates.fast_downward.sas import COST_SCALE, SasTask
from portfolio.delegates.fast_downward.sas_cache import SasCache
from portfolio.delegates.fast_downward.searches import (
    DEFAULT_QUALITY,
    RACE_ALIASES,
    SATISFICING,
    SEARCH_ALIASES,
    available_cores,
    check_quality,
    run_searches,
    search_aliases,
    search_binary,
)
from portfolio.delegates.fast_downward.translate import TranslatorOptionsError, check_options
from portfolio.delegates.fast_downward.translations import Translation, Translations
from portfolio.delegates.fast_downward.translators import Translators, find_python
from portfolio.engine import cancel
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from portfolio.engine.search_pool import SearchProcessPool
from portfolio.engine.workers import BudgetExpired, OutOfMemory, WorkerCrashed, WorkerError, WorkerProcess
from traces.attempt_details import AttemptDetails

log = logging.getLogger(__name__)

# With costs and quality "anytime": the share of the time left when the searches start (up to when the caller
# wants its answer) that improvement may use once a plan exists; a proof of optimality ends it sooner. See
# `searches.QUALITIES`. Chosen on tuning tasks (`python -m benchmarks.experiments.cost_search`, seeds 0-2 of
# logistics-large and tools-large, the ipc-costs tasks): 0.25 / 0.5 / 1.0 returned plans as cheap on all of them
# but the elevators pair (median cost / optimum 1.000, 1.000, 1.000 on logistics-large; ipc-costs 1.135, 1.135,
# 1.009), at median latencies of 161 / 208 / 247 ms (logistics-large) and 230 / 456 / 859 ms (ipc-costs): the
# extra time bought a cheaper plan only on elevators, whose improvement is slow whatever the share.
IMPROVE_SHARE = 0.25
# A* with LM-cut races the anytime search on tasks with at most this many operators (larger ones: a second
# satisficing search instead, see `searches.search_aliases`).
EXACT_MAX_OPERATORS = 1000


class FastDownward(Delegate):
    """Delegate running Fast Downward with `alias` (or a raw `search` string) on tasks with unit costs and
    `cost_alias` on tasks with action costs or learned costs.

    `workers` (default: the cores available): on unit-cost tasks, after the one translation, `alias` and up to
    `workers - 1` diverse searches (`RACE_ALIASES`) run at once; the first plan wins and the rest are killed.
    `workers=1` runs `alias` alone. A raw `search` string always runs alone.

    `selector` (settable later; `Planner(traces=...)` sets it from a learned selection model): called after
    translation with the task and its SAS task, it returns the satisficing configurations to race in order
    (`search_aliases`' `order`), or None for the fixed order. Attempts record the SAS task's size
    (`details["sas"]`) and which configurations raced (`details["searches"]`) and won (`details["search"]`):
    what the selection is learned from.

    `translate_options` (translator flags, `portfolio.delegates.fast_downward.translate.check_options`): every task is
    translated with
    them. None (the default): the driver's defaults, unless `translator_chooser` (settable later; set from the
    learned selection model like `selector`) returns options for the task, chosen BEFORE translation. Attempts
    record the options used (`details["translator"]`); both caches key on them, so a translation made with one
    option set is never handed to a call that asked for another.

    `quality` (tasks with costs, the task's own or learned; `searches.QUALITIES`): "anytime" (the default)
    returns the cheapest plan found once optimality is proved or `improve_share` of the time left has passed
    with a plan in hand; "optimal" waits for a proof (or the deadline); "first" returns the first cost-aware plan.
    A* with LM-cut races beside the anytime search on tasks of at most `exact_max_operators` operators. The
    attempt's details record every plan found (`details["plans"]`: search, cost, ms) and `details["optimal"]`."""

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
        translator_python: str | None = None,
        prewarm_translator: bool = False,
    ) -> None:
        check_quality(quality)
        self.translator_python = find_python(translator_python)  # None: CPython only (`translators`)
        # Warm the second translator's JIT in `warm_up`: for long-lived planners (the service, benchmarks of a
        # warm planner); a one-shot `portfolio plan` would only have it compete with its one task for the CPU.
        self.prewarm_translator = prewarm_translator
        if not 0.0 < improve_share <= 1.0:
            raise ValueError(f"improve_share must be in (0, 1], got {improve_share}")
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
        self.workers = workers or available_cores()
        self.translate_options = None if translate_options is None else check_options(translate_options)
        self.quality = quality
        self.improve_share = improve_share
        self.exact_max_operators = exact_max_operators
        self.selector: Callable[[Task, SasTask, tuple[str, ...]], Sequence[str] | None] | None = None
        self.translator_chooser: Callable[[Task], Sequence[str] | None] | None = None
        self._binary = str(search_binary())
        self._translators: Translators | None = None
        self._memory = Translations(self.translators, cache_size, disk_cache)
        self._searches = SearchProcessPool()
        self.inprocess_max_operators = INPROCESS_MAX_OPERATORS
        self.inprocess_node_cap = INPROCESS_NODE_CAP

    # -- translation ------------------------------------------------------------------------------------
    def translators(self) -> Translators:
        """The translator workers: CPython's, and PyPy's raced against it where there is one (`translators`)."""
        if self._translators is None:
            self._translators = Translators(self.translator_python)
        return self._translators

    def _translator(self) -> WorkerProcess:
        """The CPython translator worker (the one every task starts on)."""
        return self.translators().primary

    def supports(self, task: Task) -> bool:
        """Everything the task model reads: the translator takes ADL, costs and more than this project parses."""
        return True

    def warm_up(self) -> None:
        """Start the translator worker and a search process now, so the first call does not pay for them; with
        `prewarm_translator`, the second (PyPy) translator worker too, warmed on a bundled task."""
        self._translator()
        if self.prewarm_translator:
            self.translators().warm_up()
        aliases = self._aliases(with_costs=False)
        if not self.search:  # the searches a call with costs runs (`quality`), small task or not
            aliases = [*aliases, *self._aliases(True, exact=True), *self._aliases(True, exact=False)]
        if self.selector is not None and not self.search and self.alias in SATISFICING:
            aliases = [*aliases, *(name for name in RACE_ALIASES if name not in aliases)]  # any may be chosen
        for alias in aliases:
            self._searches.prestart(self._command(alias))

    def options_for(self, task: Task) -> tuple[str, ...]:
        """The translator options for `task`: the fixed ones, else the chooser's, else none (the defaults). A
        chooser's answer outside what the translator accepts falls back to the defaults (logged), never fails."""
        if self.translate_options is not None:
            return self.translate_options
        if self.translator_chooser is None:
            return ()
        chosen = self.translator_chooser(task)
        try:
            return check_options(chosen or ())
        except TranslatorOptionsError as error:
            log.warning("ignoring the chosen translator options: %s", error)
            return ()

    def translate(self, request: PlanRequest, deadline: float) -> tuple[Translation, tuple[int, ...] | None]:
        """The translation for the request's task (cached, or made under the deadline) and, when it was made from
        another initial state, the SAS initial values for the request's state (`translations.Translations`)."""
        return self._memory.get(request, deadline, self.options_for(request.task))

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
        details: AttemptDetails = {
            "translate_ms": round(translation.translate_ms, 3),
            "translation": translation.source,
            "translation_reused": init_values is not None,
            "translator": list(translation.options),
        }
        if translation.interpreter:
            details["translated_by"] = translation.interpreter
        if translation.sas is None:
            return DelegateOutcome(Status.UNSOLVABLE, reason="translator: goal not relaxed-reachable", details=details)
        details["sas"] = {"variables": len(translation.sas.values), "operators": len(translation.sas.operators)}
        costs = None
        if request.has_costs:
            costs = request.grounded_costs([f"({name})" for name in translation.sas.operator_names])
        if init_values is not None and not costs and not task.has_action_costs():
            solved = fd_inprocess.greedy(self, translation.sas, init_values, request.excluded, deadline, details)
            if solved is not None:
                return solved
        with_costs = bool(costs) or task.has_action_costs()
        if with_costs and check_quality(request.quality or self.quality) != "first":
            solved = fd_inprocess.cheapest(
                self, translation.sas, init_values or translation.sas.init, costs, request.excluded, deadline, details
            )
            if solved is not None:
                details["quality"] = check_quality(request.quality or self.quality)
            if solved is not None:
                return solved
        order = None
        if self.selector is not None:
            order = self.selector(task, translation.sas, translation.options)
            details["selection"] = "learned" if order else "fixed"
        sas_text = translation.sas.render(init=init_values, costs=costs, excluded=request.excluded)
        # Work carried over past its share (`request.answer_by`): the caller is already waiting, so the first plan
        # wins, as in the decomposer tier; learned costs (failure risk) keep the cost-aware plan's preference.
        race_after = request.answer_by if not costs else None
        return self.search_sas(
            sas_text,
            deadline,
            with_costs=with_costs,
            details=details,
            order=order,
            race_after=race_after,
            operators=len(translation.sas.operators),
            cost_scale=COST_SCALE if costs else 1.0,
            quality=request.quality,
            answer_by=request.answer_by,
        )

    def search_sas(
        self,
        sas_text: str,
        deadline: float,
        with_costs: bool = False,
        details: AttemptDetails | None = None,
        order: Sequence[str] | None = None,
        race_after: float | None = None,
        operators: int | None = None,
        cost_scale: float = 1.0,
        quality: str | None = None,
        answer_by: float | None = None,
    ) -> DelegateOutcome:
        """Search a SAS task (e.g. a cached translation with another goal or state swapped in) with this
        delegate's configuration (or the configurations `order` chooses), pre-started processes and deadline
        handling. After `race_after` (a monotonic time) any plan ends the wait, as in a race. With costs the
        searches follow `quality` (class docstring); `operators` (the task's count, if known) decides whether A*
        races on it, `cost_scale` what one unit of the task's costs is in the SAS text, `quality` this call's
        (None: the delegate's). `answer_by` (work carried over past its share, `PlanRequest.answer_by`): the
        caller wants an answer then, so improvement ends there ("optimal": the proof is waited for until then)."""
        if cancel.expired(deadline):  # no search process is taken (and killed) for nothing
            return DelegateOutcome(
                Status.TIMEOUT, reason="budget expired before the search", details=details or AttemptDetails()
            )
        quality = check_quality(quality or self.quality)
        exact = operators is not None and operators <= self.exact_max_operators
        aliases = self._aliases(with_costs, order, exact, quality)
        race = not with_costs and len(aliases) > 1
        details = AttemptDetails() if details is None else details
        anytime = with_costs and not self.search and self.alias in SATISFICING and quality != "first"
        if with_costs:
            details["costs"] = True  # the cost-aware searches ran: no evidence for configuration selection
            details["quality"] = quality
        improve_by = answer_by  # "optimal": a proof is waited for until the caller wants its answer
        if anytime and quality == "anytime":
            now = time.monotonic()
            horizon = deadline if answer_by is None else min(deadline, answer_by)
            improve_by = now + self.improve_share * max(0.0, horizon - now)
        commands = [(alias, self._command(alias)) for alias in aliases]
        return run_searches(
            self._searches,
            commands,
            sas_text,
            deadline,
            details,
            race=race,
            race_after=race_after,
            custom=bool(self.search),
            anytime=anytime,
            improve_by=improve_by,
            cost_scale=cost_scale,
        )

    def _aliases(
        self, with_costs: bool, order: Sequence[str] | None = None, exact: bool = False, quality: str | None = None
    ) -> list[str]:
        if self.search:
            return [self.alias]
        return search_aliases(
            self.alias, self.cost_alias, with_costs, self.workers, order, quality=quality or self.quality, exact=exact
        )

    def close(self) -> None:
        if self._translators is not None:
            self._translators.close()
            self._translators = None
        self._searches.close()
