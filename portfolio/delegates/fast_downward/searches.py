"""The search configurations of the Fast Downward delegate: which searches exist, and which ones run side by side.

Fast Downward's driver keeps translate, search and portfolio apart (`aliases.py`, `run_components.py`,
`portfolio_runner.py`); so does this project. `portfolio.delegates.fast_downward.delegate` translates and caches; this
module holds which searches may run once a SAS task exists:
- the search configurations by alias (`SEARCH_ALIASES`), what each is for beside it (the measurements behind
  them: `docs/decisions/anytime-search.md`);
- which of them one call runs side by side (`search_aliases`: a small portfolio over the cores available, first
  plan wins on unit costs, the cost-aware plan preferred with costs);
- the qualities a call with costs may ask for (`QUALITIES`).

Which of them one call runs is its `search_plan.SearchPlan`; running them as processes is `search_run`.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol


class SearchSettings(Protocol):
    """What `search_aliases` reads of the delegate's settings (`search_plan.Settings` has them)."""

    @property
    def alias(self) -> str: ...
    @property
    def cost_alias(self) -> str: ...
    @property
    def workers(self) -> int: ...


_LAMA_FIRST = (
    "let(hlm, eval_modify_costs(landmark_sum(lm_factory=lm_reasonable_orders_hps(lm_rhw()),pref=false),"
    "cost_type=one),let(hff, eval_modify_costs(ff(),cost_type=one),"
    "lazy_greedy([hff,hlm],preferred=[hff,hlm],cost_type=one,reopen_closed=false)))"
)
# Cost-sensitive, first plan only (`quality="first"`): LAMA's heuristics on real costs (plus one, so zero-cost
# actions still count) in an eager weighted A*. Eager, not lazy as in LAMA: lazy search scores a successor by its
# parent's estimate, so on a task where one expensive action reaches the goal directly it takes that action. With
# w = 3 the heuristic outweighs the cost already paid, so its first plan may be a short risky route where a longer
# safe one is cheaper (`portfolio.delegates.fast_downward.anytime`; measured: docs/decisions/anytime-search.md).
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
# Not the driver's `--alias lama`: LAMA's second phase, a greedy search on the real costs bounded by the first
# plan's cost, ignores g and so can search the whole bounded space without finding anything; and the eager
# weighted A* phases with FF alone gave the cheapest plans at the same latency (docs/decisions/anytime-search.md).
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
    settings: SearchSettings,
    with_costs: bool,
    order: Sequence[str] | None = None,
    quality: str = "first",
    exact: bool = False,
) -> list[str]:
    """The searches one call runs side by side, from the delegate's `settings` (`alias`, `cost_alias`, `workers`;
    a raw `search` string is the caller's to handle). An optimal `alias` runs alone, costs or not. Without costs:
    `alias` plus up to `workers - 1` of `RACE_ALIASES`, first plan wins; `order` (satisficing configurations, e.g.
    a learned selection's ranking for this task's domain) goes before that fixed order, which fills the cores
    `order` leaves free. With costs, by `quality`:

    - "first": a cost-blind search for coverage (the first of `order` if given, else `alias`) and the cost-aware
      `cost_alias` whose plan is preferred;
    - "anytime" / "optimal": `anytime-wastar` (its first phase is lama-first's search: the same coverage) and, on a
      second core, A* with LM-cut when the task is small enough to prove optimality on (`exact`), else the
      selection's coverage search if it differs from lama-first, else `cost_alias`. The cheapest plan wins."""
    alias, cost_alias, workers = settings.alias, settings.cost_alias, settings.workers
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
