"""The delegate catalog: every delegate by name, with its factory, tier, source, options and share.

One table, from which everything else is built: the CLI's `--delegates` choices, defaults and help text
(`portfolio.commands.plan_cmd`), `Planner`'s default cascade (the service uses it), the agent's cascade, and
`build_stages`, which turns a list of names into tiers. A new delegate is one entry here.

Factories import their module only when called, so the classical path never imports httpx. The decomposer
tier's delegates share one `SubgoalSolver`, which plans subgoals with the classical tier's own delegates when
there are any (one translator worker, one translation cache for both tiers).

Shares split a tier's budget (see `portfolio.engine.cascade`): Fast Downward 4 to pyperplan's 1 gives Fast Downward
0.8 s of the default 1 s and pyperplan at least 0.2 s (all of it when Fast Downward fails fast); the LLM 2 to the
goal agenda's 1 leaves the non-LLM fallback at least a third of the decomposer tier.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from portfolio.engine.tiers import Stage, Tier

# Imported by the CLI to build `--help`: only the builders below import the cascade (and the validator).

CLASSICAL_TIER = "classical"
DECOMPOSER_TIER = "decomposer"


@dataclass(frozen=True)
class DelegateSpec:
    """One catalog entry. `factory(options, solver)` makes the delegate (`solver`: the decomposer tier's shared
    `SubgoalSolver`, None for classical delegates); `options` are the keyword options it reads; `required`
    maps options it cannot do without to the message that says so. `share` repeats the delegate class's own
    (`Delegate.share`) so that `--help` can print it without importing the delegate; a test keeps them equal."""

    name: str
    factory: Callable[[Mapping[str, Any], Any], Any]
    tier: str
    source: str
    summary: str
    share: float = 1.0
    options: tuple[str, ...] = ()
    required: tuple[tuple[str, str], ...] = ()


def _fast_downward(options: Mapping[str, Any], solver: Any):
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.delegates.fast_downward.searches import DEFAULT_QUALITY

    return FastDownward(
        alias=options.get("fd_alias") or "lama-first",
        search=options.get("fd_search"),
        disk_cache=options.get("translation_cache"),
        workers=options.get("fd_workers"),
        translate_options=options.get("fd_translate_options"),
        quality=options.get("fd_quality") or DEFAULT_QUALITY,
    )


def _pyperplan(options: Mapping[str, Any], solver: Any):
    from portfolio.delegates.pyperplan import Pyperplan

    return Pyperplan()


def _typed_search(options: Mapping[str, Any], solver: Any):
    from portfolio.delegates.typed_search import TypedSearch

    return TypedSearch()


def _goal_agenda(options: Mapping[str, Any], solver: Any):
    from portfolio.delegates.goal_agenda import GoalAgenda

    return GoalAgenda(solver=solver)


def _llm(options: Mapping[str, Any], solver: Any):
    from portfolio.delegates.llm import LLMDelegate
    from portfolio.delegates.llm_client import LLMClient

    client = LLMClient(options["llm_url"], options["llm_model"], api_key=options.get("llm_api_key"))
    return LLMDelegate(client, solver=solver, repair_rounds=options.get("repair_rounds", 3))


CATALOG: dict[str, DelegateSpec] = {
    spec.name: spec
    for spec in (
        DelegateSpec(
            "fast-downward",
            _fast_downward,
            CLASSICAL_TIER,
            "classical",
            share=4.0,
            options=("fd_alias", "fd_search", "translation_cache", "fd_workers", "fd_translate_options", "fd_quality"),
            summary="Fast Downward (translator worker + search processes, killed at the deadline)",
        ),
        DelegateSpec(
            "pyperplan",
            _pyperplan,
            CLASSICAL_TIER,
            "classical",
            summary="pyperplan greedy search, STRIPS only (worker process, killed at the deadline)",
        ),
        DelegateSpec(
            "typed-search",
            _typed_search,
            CLASSICAL_TIER,
            "classical",
            summary="exact in-process A* for tiny tasks (agent actions); declines larger ones",
        ),
        DelegateSpec(
            "llm",
            _llm,
            DECOMPOSER_TIER,
            "llm",
            share=2.0,
            options=("llm_url", "llm_model", "llm_api_key", "repair_rounds"),
            required=(
                ("llm_url", "the llm delegate needs --llm-url (an OpenAI-compatible base URL ending in /v1)"),
                ("llm_model", "the llm delegate needs --llm-model (the model name the server knows)"),
            ),
            summary="LLM decomposition and plans, validated and repaired (needs --llm-url, --llm-model)",
        ),
        DelegateSpec(
            "goal-agenda",
            _goal_agenda,
            DECOMPOSER_TIER,
            "decomposition",
            summary="goal-agenda decomposer (no LLM): the goal a part at a time, then the whole goal",
        ),
    )
}

DEFAULT_DELEGATES = ("fast-downward", "pyperplan", "goal-agenda")
DEFAULT_WITH_LLM = ("fast-downward", "pyperplan", "llm", "goal-agenda")
CLASSICAL_ONLY = ("fast-downward", "pyperplan")
AGENT_DELEGATES = ("typed-search", "fast-downward", "pyperplan")  # replanning in milliseconds first
SOLVER_DELEGATES = ("fast-downward", "pyperplan")  # what may plan a decomposer's subgoals

# Every delegate of each tier (for `--help`, the benchmarks' planner names)
CLASSICAL_DELEGATES = tuple(n for n, s in CATALOG.items() if s.tier == CLASSICAL_TIER)
DECOMPOSER_DELEGATES = tuple(n for n, s in CATALOG.items() if s.tier == DECOMPOSER_TIER)


def default_names(with_llm: bool = False) -> tuple[str, ...]:
    return DEFAULT_WITH_LLM if with_llm else DEFAULT_DELEGATES


# Options of the cascade itself, beside each delegate's own (`DelegateSpec.options`).
CASCADE_OPTIONS = ("decomposer_budget_s", "classical_delegates", "classical_names")


def known_options() -> tuple[str, ...]:
    return tuple(sorted({*CASCADE_OPTIONS, *(o for spec in CATALOG.values() for o in spec.options)}))


def check_options(options: Mapping[str, Any]) -> None:
    """ValueError for an option no delegate reads (a misspelling would otherwise be dropped without a word),
    with the closest known names."""
    import difflib

    known = known_options()
    for option in sorted(set(options) - set(known)):
        close = difflib.get_close_matches(option, known, n=2)
        hint = f"; did you mean {' or '.join(close)}?" if close else f"; known options: {', '.join(known)}"
        raise ValueError(f"unknown option {option!r}{hint}")


def check_names(names: Sequence[str], **options: Any) -> None:
    """ValueError naming the problem for an unknown delegate, an unknown option or a missing required option,
    before anything is started (so a bad command line leaves no process behind)."""
    check_options(options)
    for name in names:
        spec = CATALOG.get(name)
        if spec is None:
            raise ValueError(f"unknown delegate {name!r}; expected a comma-separated list of: {', '.join(CATALOG)}")
        for option, message in spec.required:
            if not options.get(option):
                raise ValueError(message)


def help_text() -> str:
    """One line per delegate, for `--help`."""
    return "; ".join(f"{name}: {spec.summary}" for name, spec in CATALOG.items())


def make_delegate(name: str, *, solver: Any = None, **options: Any):
    """One delegate by catalog name (decomposers get their own `SubgoalSolver` unless given one)."""
    check_names([name], **options)
    spec = CATALOG[name]
    if spec.tier == DECOMPOSER_TIER and solver is None:
        solver = _solver(options.get("classical_names") or (), options, shared=None)
    return spec.factory(options, solver)


def _solver(classical_names: Sequence[str], options: Mapping[str, Any], shared: Sequence[Any] | None):
    """The decomposers' subgoal solver. Decomposition is built on Fast Downward's translation (the goal agenda
    orders goals on it, subgoals are searched on it), so the solver always has Fast Downward: the classical
    tier's own delegates when they include it (shared, not owned), else its own."""
    from portfolio.delegates.decompose import SubgoalSolver

    if shared and any(d.name == "fast-downward" for d in shared):
        names, delegates = [d.name for d in shared], list(shared)
    else:
        names, delegates = ["fast-downward", *(n for n in classical_names if n in SOLVER_DELEGATES)], None
    return SubgoalSolver(
        classical=list(dict.fromkeys(names)),
        fd_alias=options.get("fd_alias"),
        fd_search=options.get("fd_search"),
        delegates=delegates,
    )


def tier_shares(names: Sequence[str], shares: Mapping[str, float] | None) -> tuple[float, ...]:
    """Each delegate's share: `shares[name]` when given, else the catalog's."""
    shares = shares or {}
    unknown = sorted(set(shares) - set(CATALOG))
    if unknown:
        raise ValueError(f"shares for unknown delegate(s) {', '.join(unknown)}; known: {', '.join(CATALOG)}")
    return tuple(float(shares.get(name, CATALOG[name].share)) for name in names)


def decomposer_tier(
    names: Sequence[str],
    classical_names: Sequence[str] = (),
    *,
    shares: Mapping[str, float] | None = None,
    **options: Any,
) -> Tier:
    """The decomposer tier: `names` in order, sharing `decomposer_budget_s` (default 30 s) by their shares and
    one subgoal solver: the classical tier's own delegates when given as `classical_delegates` (one translation
    cache for both tiers), else new ones built from `classical_names` (default: Fast Downward, then pyperplan)."""
    check_names(names, **options)
    wrong = [n for n in names if CATALOG[n].tier != DECOMPOSER_TIER]
    if wrong:
        raise ValueError(f"{', '.join(wrong)} cannot run in the decomposer tier")
    shared = [d for d in options.pop("classical_delegates", None) or () if d.name in SOLVER_DELEGATES]
    from portfolio.engine.cascade import DECOMPOSER_BUDGET_S
    from portfolio.engine.tiers import Tier

    # None is "not given"; 0 is an empty tier, as the caller asked (not the 30 s default)
    budget = options.get("decomposer_budget_s")
    budget = DECOMPOSER_BUDGET_S if budget is None else budget
    with contextlib.ExitStack() as cleanup:
        solver = _solver(classical_names, options, shared)
        cleanup.callback(solver.close)
        delegates = []
        for name in names:
            delegate = CATALOG[name].factory(options, solver)
            cleanup.callback(delegate.close)
            delegates.append(delegate)
        tier = Tier(DECOMPOSER_TIER, delegates, budget_s=budget, shares=tier_shares(names, shares))
        cleanup.pop_all()  # built: the tier owns them now
    return tier


def build_stages(
    names: Sequence[str] = DEFAULT_DELEGATES,
    budget_s: float | None = None,
    *,
    shares: Mapping[str, float] | None = None,
    **options: Any,
) -> list[Stage]:
    """Classical delegates share one tier of `budget_s` (default 1 s); decomposers follow in a tier of their own
    (`decomposer_budget_s`, default 30 s) and solve their subgoals with the same classical delegates. Names and
    required options are checked before anything starts; if building fails half-way, what was built is
    closed."""
    check_names(names, **options)
    tier_shares(names, shares)
    classical_names = [n for n in names if CATALOG[n].tier == CLASSICAL_TIER]
    others = [n for n in names if CATALOG[n].tier == DECOMPOSER_TIER]
    from portfolio.engine.cascade import CLASSICAL_BUDGET_S
    from portfolio.engine.tiers import Tier

    budget_s = CLASSICAL_BUDGET_S if budget_s is None else budget_s
    stages: list[Stage] = []
    with contextlib.ExitStack() as cleanup:
        classical = []
        for name in classical_names:
            delegate = CATALOG[name].factory(options, None)
            cleanup.callback(delegate.close)
            classical.append(delegate)
        if classical:
            stages.append(Tier(CLASSICAL_TIER, classical, budget_s, shares=tier_shares(classical_names, shares)))
        if others:
            stages.append(
                decomposer_tier(
                    others, classical_names=classical_names, classical_delegates=classical, shares=shares, **options
                )
            )
        cleanup.pop_all()
    return stages
