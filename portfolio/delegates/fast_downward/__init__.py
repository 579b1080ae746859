"""Fast Downward as a delegate: one call spans translation, the SAS+ task, its caches and the searches.

delegate.py     `FastDownward`: translate (cached), then search in this process or in search processes
search_plan.py  one call's `SearchPlan` (searches, translator flags, quality, costs, budget share), decided once
translate.py    the translator in a worker process, its options
sas.py          the SAS+ task Fast Downward's translator writes: parse, render with costs and exclusions
sas_cache.py    translations kept on disk across processes and runs
searches.py     the search configurations (aliases), which of them run side by side
search_run.py   running a call's searches as `downward` processes, reading their plans back
anytime.py      searching under costs: keep the cheapest plan the budget allows, stop on a proof
inprocess.py    small tasks searched in this process (GBFS with hFF, A* with LM-cut landmarks) before any process;
                their plans answer as "fd-inprocess"
sas_search.py   GBFS with hFF over a compiled SAS+ task (pure Python)
sas_astar.py    A* with h_max over a compiled SAS+ task with costs (pure Python)
exitcodes.py    what the search binary's exit codes mean

from portfolio.delegates.fast_downward import FastDownward
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from portfolio.delegates.fast_downward.delegate import FastDownward

__all__ = ["FastDownward"]


def __getattr__(name: str):
    # Lazy: the modules of this package import each other's small parts (sas, searches) without the delegate.
    if name == "FastDownward":
        from portfolio.delegates.fast_downward.delegate import FastDownward

        return FastDownward
    raise AttributeError(name)
