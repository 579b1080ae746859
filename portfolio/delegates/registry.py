"""The decomposer tier's delegates by CLI name: `llm` (LLM decomposition, validated and repaired) and
`goal-agenda` (the embedded non-LLM decomposer).

Loaded only when a cascade asks for one of them, so the classical path never imports httpx. The delegates of one
tier share one `SubgoalSolver` (one Fast Downward translator worker, one translation per task).
"""

from __future__ import annotations

from typing import Any, Sequence

from portfolio.cascade import DECOMPOSER_BUDGET_S, Tier
from portfolio.delegates.decompose import CLASSICAL, SubgoalSolver

EXTRA_DELEGATES = ("llm", "goal-agenda")


def make_extra_delegate(name: str, *, solver: SubgoalSolver | None = None, **options: Any):
    """A decomposer-tier delegate. Options: llm_url, llm_model, llm_api_key (default env PORTFOLIO_LLM_API_KEY),
    repair_rounds, classical_names, fd_alias, fd_search, decomposer_budget_s (unused here: the tier's budget)."""
    if name not in EXTRA_DELEGATES:
        known = ", ".join((*CLASSICAL, *EXTRA_DELEGATES))
        raise ValueError(f"unknown delegate {name!r}; known delegates: {known}")
    if solver is None:
        solver = SubgoalSolver(
            classical=options.get("classical_names") or CLASSICAL,
            fd_alias=options.get("fd_alias"),
            fd_search=options.get("fd_search"),
        )
    if name == "goal-agenda":
        from portfolio.delegates.goal_agenda import GoalAgenda

        return GoalAgenda(solver=solver)
    url, model = options.get("llm_url"), options.get("llm_model")
    if not url:
        raise ValueError("the llm delegate needs --llm-url (an OpenAI-compatible base URL ending in /v1)")
    if not model:
        raise ValueError("the llm delegate needs --llm-model (the model name the server knows)")
    from portfolio.delegates.llm import LLMDelegate
    from portfolio.delegates.llm_client import LLMClient

    client = LLMClient(url, model, api_key=options.get("llm_api_key"))
    return LLMDelegate(client, solver=solver, repair_rounds=options.get("repair_rounds", 3))


def decomposer_tier(names: Sequence[str], classical_names: Sequence[str] = (), **options: Any) -> Tier:
    """The decomposer tier: `names` in order, sharing `decomposer_budget_s` (default 30 s) and one subgoal
    solver: the classical tier's own delegates when given as `classical_delegates` (one translation cache for
    both tiers), else new ones built from `classical_names` (default: Fast Downward, then pyperplan)."""
    for name in names:
        if name not in EXTRA_DELEGATES:
            make_extra_delegate(name)  # raises the unknown-name error
    shared = [d for d in options.pop("classical_delegates", None) or () if d.name in CLASSICAL]
    solver = SubgoalSolver(
        classical=[n for n in classical_names if n in CLASSICAL] or CLASSICAL,
        fd_alias=options.get("fd_alias"),
        fd_search=options.get("fd_search"),
        delegates=shared or None,
    )
    budget = options.get("decomposer_budget_s") or DECOMPOSER_BUDGET_S
    delegates = [make_extra_delegate(name, solver=solver, **options) for name in names]
    if "llm" in names and "goal-agenda" in names:
        # The LLM must leave the fallback some of the tier: the goal agenda gets at least a third of it.
        for delegate in delegates:
            if delegate.name == "llm":
                delegate.budget_s = budget * 2 / 3
    return Tier("decomposer", delegates, budget_s=budget)
