"""One Fast Downward call's search plan (`portfolio.delegates.fast_downward.search_plan`): what runs, decided once
from the delegate's settings and the request, on a real translation of a small task."""

from __future__ import annotations

import time

import pytest
from support import IPC

from domains.load import load_task
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.fast_downward.sas import COST_SCALE
from portfolio.delegates.fast_downward.search_plan import Settings, plan_call, plan_sas
from portfolio.engine.results import PlanRequest


@pytest.fixture(scope="module")
def translated():
    task = load_task(IPC / "blocks" / "domain.pddl", IPC / "blocks" / "probBLOCKS-4-0.pddl")
    with FastDownward() as fd:
        translation, _ = fd.translate(PlanRequest(task=task), time.monotonic() + 60)
    assert translation.sas is not None and len(translation.sas.operators) <= 120  # small: in-process searches
    return task, translation


class Ranked:
    """A selection that ranks `order` first on every domain (`portfolio.engine.results.Selection`)."""

    def __init__(self, order: list[str] | None) -> None:
        self.order = order

    def predict(self, domain: str, operators: int | None = None, translator=()) -> list[str] | None:
        return self.order

    def predict_translator(self, domain: str, race_size: int = 2) -> tuple[str, ...]:
        return ()


def test_a_unit_cost_task_races_and_a_replan_of_it_is_searched_in_process_first(translated):
    task, translation = translated
    settings = Settings(workers=2)
    first = plan_call(settings, PlanRequest(task=task), translation, False, None)
    assert (first.inprocess, first.searches, first.race, first.with_costs) == (
        None,
        ("lama-first", "eager-ff-cg"),
        True,
        False,
    )
    replan = plan_call(settings, PlanRequest(task=task), translation, True, None)
    assert replan.inprocess == "greedy" and replan.searches == first.searches


def test_costs_run_a_star_in_process_then_the_pair_of_the_quality(translated):
    task, translation = translated
    costs = {f"({name})": 2.0 for name in translation.sas.operator_names}
    settings = Settings(workers=2)
    anytime = plan_call(settings, PlanRequest(task=task), translation, False, costs)
    assert anytime.inprocess == "astar" and anytime.searches == ("anytime-wastar", "seq-opt-lmcut")
    assert anytime.anytime and anytime.improve_share == settings.improve_share and anytime.costs == costs
    assert anytime.cost_scale == COST_SCALE and not anytime.race
    first = plan_call(settings, PlanRequest(task=task, quality="first"), translation, False, costs)
    assert first.inprocess is None and first.searches == ("lama-first", "lama-costs")
    assert not first.anytime and first.improve_share is None and first.quality == "first"
    optimal = plan_call(settings, PlanRequest(task=task, quality="optimal"), translation, False, costs)
    assert optimal.anytime and optimal.improve_share is None  # a proof is waited for


def test_an_optimal_alias_or_a_raw_search_runs_alone_without_in_process_search(translated):
    task, translation = translated
    optimal = plan_call(Settings(alias="seq-opt-lmcut", workers=4), PlanRequest(task=task), translation, True, None)
    assert (optimal.inprocess, optimal.searches, optimal.race) == (None, ("seq-opt-lmcut",), False)
    raw = plan_call(Settings(search="astar(blind())", workers=4), PlanRequest(task=task), translation, True, None)
    assert (raw.inprocess, raw.searches, raw.custom) == (None, ("lama-first",), "astar(blind())")


def test_work_carried_over_races_after_the_callers_answer_time_on_unit_costs_only(translated):
    task, translation = translated
    answer_by = time.monotonic() + 1.0
    request = PlanRequest(task=task, answer_by=answer_by)
    assert plan_call(Settings(workers=2), request, translation, False, None).race_after == answer_by
    costs = {f"({name})": 1.5 for name in translation.sas.operator_names}
    learned = plan_call(Settings(workers=2), request, translation, False, costs)
    assert learned.race_after is None and learned.answer_by == answer_by


def test_the_requests_selection_orders_the_race(translated):
    task, translation = translated
    learned = plan_call(
        Settings(workers=2), PlanRequest(task=task, selection=Ranked(["lazy-add"])), translation, False, None
    )
    assert learned.searches == ("lazy-add", "lama-first") and learned.selection == "learned"
    fixed = plan_call(Settings(workers=2), PlanRequest(task=task, selection=Ranked(None)), translation, False, None)
    assert fixed.searches == ("lama-first", "eager-ff-cg") and fixed.selection == "fixed"
    assert plan_call(Settings(workers=2), PlanRequest(task=task), translation, False, None).selection is None


def test_improvement_ends_at_a_share_of_the_time_left_up_to_the_callers_answer_time():
    plan = plan_sas(Settings(workers=2), with_costs=True)
    now = time.monotonic()
    assert plan.improve_share == 0.25
    assert plan.improve_by(now + 4.0) == pytest.approx(now + 1.0, abs=0.05)
    assert plan_sas(Settings(workers=2), with_costs=False).improve_by(now + 4.0) is None


@pytest.mark.parametrize(
    "settings, message",
    [
        (Settings(quality="best"), "unknown quality"),
        (Settings(improve_share=0.0), "improve_share"),
        (Settings(workers=0), "at least 1"),
        (Settings(alias="no-such"), "unknown Fast Downward alias"),
    ],
)
def test_settings_out_of_range_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        settings.check()
