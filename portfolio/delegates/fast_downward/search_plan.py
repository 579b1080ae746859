"""One Fast Downward call's search plan: what the delegate will do with a request, decided in one place.

Fast Downward's path has many interacting modes: the in-process searches, the race of diverse searches, the
cost-aware pair, the qualities, a learned selection, translator flags. Each call's choices among them are made
here, once, from the delegate's fixed `Settings` and the request, into a frozen `SearchPlan` that the rest of the
path (`delegate`, `inprocess`, `search_run`) reads and never changes:

- `translator_options`: the translator flags for a task, before translation (the fixed ones, else the request's
  selection's, else the driver's defaults);
- `plan_call`: after translation, which in-process search runs first (if any), which `downward` searches run side
  by side, how their wait ends (first plan, cheapest plan, the improvement share) and with what costs;
- `plan_sas`: the same for a SAS task searched on its own (the goal agenda's shared translation, benchmarks).

Why one place: the choices depend on each other (an optimal alias turns off the in-process searches and the race;
costs turn the race into the cost-aware pair), so one function that sees them all says what a call will run, and
nothing set on the delegate between calls can change it halfway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from portfolio.delegates.fast_downward.sas import COST_SCALE
from portfolio.delegates.fast_downward.searches import (
    DEFAULT_QUALITY,
    SATISFICING,
    SEARCH_ALIASES,
    check_quality,
    search_aliases,
)
from portfolio.delegates.fast_downward.translate import TranslatorOptionsError, check_options
from portfolio.engine.results import PlanRequest

if TYPE_CHECKING:
    from portfolio.delegates.fast_downward.translations import Translation

log = logging.getLogger(__name__)

# With costs and quality "anytime": the share of the time left when the searches start (up to when the caller
# wants its answer) that improvement may use once a plan exists; a proof of optimality ends it sooner. See
# `searches.QUALITIES`. A larger share bought cheaper plans only where improvement is slow whatever the share
# (docs/decisions/anytime-search.md).
IMPROVE_SHARE = 0.25
# A* with LM-cut races the anytime search on tasks with at most this many operators (larger ones: a second
# satisficing search instead, see `searches.search_aliases`).
EXACT_MAX_OPERATORS = 1000
# In-process search (`portfolio.delegates.fast_downward.inprocess`): only for tasks with at most this many
# operators. hFF costs O(operators) per state in Python, so past some size a `downward` process is faster; 120 sits
# between the sizes measured faster in this process and those faster in a process (docs/decisions/in-process-gbfs.md).
INPROCESS_MAX_OPERATORS = 120
INPROCESS_NODE_CAP = 20_000  # states an in-process search may generate before it gives up (`memout`)

InProcess = Literal["greedy", "astar"]


@dataclass(frozen=True)
class Settings:
    """A `FastDownward` delegate's configuration, fixed when it is made (the class docstring says what each
    means). `check` raises ValueError on a value the delegate cannot run with."""

    alias: str = "lama-first"
    search: str | None = None  # a raw search string: runs alone, instead of `alias`'s
    cost_alias: str = "lama-costs"
    workers: int = 1
    translate_options: tuple[str, ...] | None = None  # None: the selection's, else the driver's defaults
    quality: str = DEFAULT_QUALITY
    improve_share: float = IMPROVE_SHARE
    exact_max_operators: int = EXACT_MAX_OPERATORS
    inprocess_max_operators: int = INPROCESS_MAX_OPERATORS
    inprocess_node_cap: int = INPROCESS_NODE_CAP

    def check(self) -> Settings:
        """These settings, or ValueError naming the first one out of range."""
        check_quality(self.quality)
        if not 0.0 < self.improve_share <= 1.0:
            raise ValueError(f"improve_share must be in (0, 1], got {self.improve_share}")
        if self.workers < 1:
            raise ValueError(f"Fast Downward workers must be at least 1, got {self.workers}")
        for wanted in (self.alias, self.cost_alias):
            if wanted not in SEARCH_ALIASES:
                raise ValueError(f"unknown Fast Downward alias {wanted!r}; known: {', '.join(SEARCH_ALIASES)}")
        if self.translate_options is not None:
            check_options(self.translate_options)
        return self

    @property
    def satisficing(self) -> bool:
        """Whether satisficing searches may answer: an optimal alias or a raw search string promised a search
        of its own, so neither the in-process searches, the race nor the anytime pair run."""
        return not self.search and self.alias in SATISFICING


@dataclass(frozen=True)
class SearchPlan:
    """What one call searches with, and how the wait for it ends.

    `searches`: the aliases run side by side as `downward` processes (`custom`: a raw search string run under
    `searches[0]`'s name, reported as "custom"). `inprocess`: the search tried in this process first
    ("greedy": GBFS with hFF on a unit-cost replan; "astar": A* on a small task with costs; None: none), at most
    `inprocess_node_cap` states. `with_costs`: the cost-aware searches run, `quality` says how plan cost is traded
    for time; `costs` (grounded, PDDL names; None: the task's own) are written into the SAS task, `cost_scale`
    converts its integer costs back; `excluded` (PDDL names) are left out of the task. `race`: the first plan
    wins; `race_after` (monotonic): from then on any plan ends the wait. `anytime`: the cheapest plan of any
    search wins; the wait ends on a proof or, with `improve_share`, once a plan exists and that share of the time
    left has passed (`improve_by`); `answer_by` (monotonic) is when the caller wants its answer (work carried
    over past its share). `selection`: "learned" or "fixed" when a selection model was asked for an order, else
    None."""

    searches: tuple[str, ...]
    custom: str | None = None
    inprocess: InProcess | None = None
    inprocess_node_cap: int = INPROCESS_NODE_CAP
    with_costs: bool = False
    quality: str = DEFAULT_QUALITY
    costs: Mapping[str, float] | None = None
    excluded: frozenset[str] = frozenset()
    cost_scale: float = 1.0
    race: bool = False
    race_after: float | None = None
    anytime: bool = False
    improve_share: float | None = None
    answer_by: float | None = None
    selection: str | None = None

    def improve_by(self, deadline: float) -> float | None:
        """When improvement ends (a monotonic time), given the call's deadline, measured from now (the searches
        start): `improve_share` of the time left up to when the caller wants its answer; without a share, when
        the caller wants its answer ("optimal": the proof is waited for until then), or None (only a proof or
        the deadline)."""
        if self.improve_share is None:
            return self.answer_by
        now = time.monotonic()
        horizon = deadline if self.answer_by is None else min(deadline, self.answer_by)
        return now + self.improve_share * max(0.0, horizon - now)


def translator_options(settings: Settings, request: PlanRequest) -> tuple[str, ...]:
    """The translator flags for the request's task: the fixed ones, else the request's selection's, else none
    (the driver's defaults). A selection's answer outside what the translator accepts falls back to the defaults
    (logged), never fails."""
    if settings.translate_options is not None:
        return settings.translate_options
    if request.selection is None:
        return ()
    chosen = request.selection.predict_translator(request.task.domain_fingerprint, settings.workers)
    try:
        return check_options(chosen or ())
    except TranslatorOptionsError as error:
        log.warning("ignoring the chosen translator options: %s", error)
        return ()


def plan_call(
    settings: Settings, request: PlanRequest, translation: Translation, reused: bool, costs: Mapping[str, float] | None
) -> SearchPlan:
    """The search plan of a `FastDownward.solve` call once `translation` (with a SAS task) exists: `reused` says
    whether its initial state was rewritten for the request's (a replan), `costs` are the request's costs
    grounded on its operators (None: the task's own).

    In-process first: GBFS on a replan of a small unit-cost task, A* on a small task with costs unless quality
    is "first" (`inprocess`). Then the `downward` searches (`searches.search_aliases`), in the order the request's
    selection gives (unit costs: the race's members; with costs: the coverage search) or the fixed one. Work
    carried over past its share races after `answer_by` on unit costs: the caller is already waiting, so the
    first plan wins; learned costs keep the cost-aware plan's preference."""
    sas = translation.sas
    assert sas is not None
    task = request.task
    quality = check_quality(request.quality or settings.quality)
    with_costs = bool(costs) or task.has_action_costs()
    small = settings.satisficing and len(sas.operators) <= settings.inprocess_max_operators
    inprocess: InProcess | None = None
    if small and reused and not with_costs:
        inprocess = "greedy"
    elif small and with_costs and quality != "first":
        inprocess = "astar"
    order, selection = None, None
    if request.selection is not None:
        order = request.selection.predict(task.domain_fingerprint, len(sas.operators), translation.options)
        selection = "learned" if order else "fixed"
    searched = _plan(
        settings,
        with_costs=with_costs,
        quality=quality,
        exact=len(sas.operators) <= settings.exact_max_operators,
        order=order,
    )
    return replace(
        searched,
        inprocess=inprocess,
        costs=costs,
        excluded=request.excluded,
        cost_scale=COST_SCALE if costs else 1.0,
        race_after=request.answer_by if not costs else None,
        answer_by=request.answer_by,
        selection=selection,
    )


def plan_sas(settings: Settings, with_costs: bool, quality: str | None = None, exact: bool = False) -> SearchPlan:
    """The search plan for a SAS task searched on its own (no in-process search, no selection): `with_costs`
    when its text carries costs to respect, `quality` the call's (None: the settings'), `exact` when the task is
    small enough for A* to race the anytime search (its size unknown: not)."""
    return _plan(settings, with_costs=with_costs, quality=check_quality(quality or settings.quality), exact=exact)


def _plan(
    settings: Settings, *, with_costs: bool, quality: str, exact: bool = False, order: Sequence[str] | None = None
) -> SearchPlan:
    """The `downward` searches and their wait, from the call's costs, quality, size and selection; the fields
    that depend on the request alone (in-process search, costs, deadlines) keep their defaults, for
    `plan_call` to fill in."""
    if settings.search:
        searches: tuple[str, ...] = (settings.alias,)
    else:
        searches = tuple(search_aliases(settings, with_costs, order, quality=quality, exact=exact))
    anytime = with_costs and settings.satisficing and quality != "first"
    return SearchPlan(
        searches=searches,
        custom=settings.search or None,
        inprocess_node_cap=settings.inprocess_node_cap,
        with_costs=with_costs,
        quality=quality,
        race=not with_costs and len(searches) > 1,
        anytime=anytime,
        improve_share=settings.improve_share if anytime and quality == "anytime" else None,
    )
