"""Options a cascade is built with are checked: a misspelled one is an error naming the closest known option,
raised before any process starts (it used to be dropped without a word)."""

from __future__ import annotations

import pytest

from portfolio.delegates.registry import build_stages, check_options, known_options
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import Delegate
from portfolio.engine.tiers import Tier


def test_a_misspelled_option_is_an_error_that_suggests_the_right_one():
    with pytest.raises(ValueError, match=r"unknown option 'fd_alais'; did you mean fd_alias\b"):
        build_stages(["fast-downward"], fd_alais="seq-opt-lmcut")


def test_an_option_nothing_is_close_to_lists_the_known_ones():
    with pytest.raises(ValueError, match="known options: .*decomposer_budget_s.*fd_alias"):
        check_options({"colour": "blue"})


def test_every_option_a_delegate_reads_is_known():
    assert {"fd_alias", "fd_quality", "llm_url", "decomposer_budget_s"} <= set(known_options())
    stages = build_stages(["fast-downward"], fd_alias="lama-first", fd_workers=1)
    try:
        assert [d.name for d in stages[0].delegates] == ["fast-downward"]
    finally:
        for stage in stages:
            stage.close()


def test_a_stage_that_is_not_a_delegate_is_a_type_error_naming_it():
    class Planner:  # a delegate-like object that does not subclass Delegate
        name = "mine"

        def solve(self, request, deadline):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="is not a Delegate; subclass portfolio.engine.results.Delegate"):
        Tier("classical", [Planner()], 1.0)
    with pytest.raises(TypeError, match="the cascade: .* is not a Delegate"):
        PortfolioDecomposition([Planner()])


def test_catalog_shares_are_the_delegates_own():
    """`--help` prints the catalog's shares without importing the delegates; a tier without shares uses each
    delegate's `share` attribute: the two must agree."""
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.delegates.goal_agenda import GoalAgenda
    from portfolio.delegates.llm import LLMDelegate
    from portfolio.delegates.pyperplan import Pyperplan
    from portfolio.delegates.registry import CATALOG
    from portfolio.delegates.typed_search import TypedSearch

    classes = {
        "fast-downward": FastDownward,
        "pyperplan": Pyperplan,
        "typed-search": TypedSearch,
        "llm": LLMDelegate,
        "goal-agenda": GoalAgenda,
    }
    assert set(classes) == set(CATALOG)
    for name, cls in classes.items():
        assert CATALOG[name].share == cls.share, name
    assert issubclass(FastDownward, Delegate) and FastDownward.share == 4.0


def test_a_budget_beside_given_stages_is_an_error_not_ignored():
    from portfolio import Planner, build_stages

    stages = build_stages(["pyperplan"], 2.0)
    with pytest.raises(ValueError, match="stages given carry their own budgets"):
        Planner(stages, budget_s=5.0, warm=False)
    for stage in stages:
        stage.close()


@pytest.mark.parametrize("budget", [0.0, -1.0, float("nan"), float("inf")])
def test_a_tier_budget_must_be_finite_and_positive(budget):
    """An infinite budget used to overflow select()'s timeout inside the delegates; zero, negative and nan ones
    quietly left the tier no time."""
    with pytest.raises(ValueError, match="budget_s: expected a finite number of seconds > 0"):
        Tier("classical", [], budget)


def test_a_decomposer_budget_of_zero_is_refused_not_replaced_by_the_default():
    """`decomposer_budget_s=0` used to mean the default 30 s, without a word."""
    with pytest.raises(ValueError, match="budget_s: expected a finite number of seconds > 0"):
        build_stages(["goal-agenda"], decomposer_budget_s=0)


@pytest.mark.parametrize("text", ["fast-downward=inf", "fast-downward=nan", "fast-downward=0", "pyperplan=-1"])
def test_a_share_must_be_finite_and_positive(text):
    """`--shares fast-downward=inf` used to pass, and Fast Downward's slice of the tier came out NaN: its
    attempt ended in `ValueError: Invalid value NaN`."""
    from portfolio.commands.plan_cmd import parse_shares

    with pytest.raises(ValueError, match="expected NAME=WEIGHT with a finite positive weight"):
        parse_shares(text)


def test_a_tier_refuses_an_infinite_share():
    from portfolio.delegates.pyperplan import Pyperplan

    with Pyperplan() as pyperplan, pytest.raises(ValueError, match="shares must be finite and positive"):
        Tier("classical", [pyperplan], 1.0, shares=[float("inf")])
