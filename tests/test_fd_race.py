"""Parallel configurations in Fast Downward's tier: one translation, diverse searches at once, first plan wins,
the losers killed; tasks with costs keep the cost-aware pair; optimal configurations run alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from support import IPC, wait_until

from domains.bundled import bundled_task
from domains.load import load_task
from domains.validate import validate_plan
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.fast_downward.search_plan import Settings
from portfolio.delegates.fast_downward.searches import RACE_ALIASES, available_cores, search_aliases
from portfolio.engine.results import PlanRequest, Status


def test_which_searches_run():
    assert search_aliases(Settings(workers=1), False) == ["lama-first"]
    assert search_aliases(Settings(workers=2), False) == ["lama-first", RACE_ALIASES[0]]
    assert search_aliases(Settings(workers=64), False) == ["lama-first", *RACE_ALIASES]
    assert search_aliases(Settings(workers=4), True) == ["lama-first", "lama-costs"]  # quality first
    assert search_aliases(Settings(workers=2), True, quality="anytime", exact=True) == [
        "anytime-wastar",
        "seq-opt-lmcut",
    ]
    assert search_aliases(Settings(workers=2), True, quality="anytime") == ["anytime-wastar", "lama-costs"]
    assert search_aliases(Settings(workers=2), True, ["eager-ff-cg"], quality="optimal") == [
        "anytime-wastar",
        "eager-ff-cg",
    ]
    assert search_aliases(Settings(workers=1), True, quality="anytime", exact=True) == ["anytime-wastar"]
    assert search_aliases(Settings(alias="seq-opt-lmcut", workers=4), False) == ["seq-opt-lmcut"]
    assert search_aliases(Settings(alias="seq-opt-lmcut", workers=4), True) == ["seq-opt-lmcut"]
    assert FastDownward().settings.workers == available_cores() == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="at least 1"):
        FastDownward(workers=0)


@pytest.mark.parametrize("alias", RACE_ALIASES)
def test_every_raced_configuration_plans_on_its_own(alias):
    task = bundled_task("blocksworld", 5, seed=2)
    with FastDownward(alias=alias, workers=1) as fd:
        outcome = fd.solve(PlanRequest(task=task), time.monotonic() + 30)
    assert outcome.status is Status.SOLVED and outcome.details["search"] == alias
    assert validate_plan(task, outcome.plan).ok


def test_the_first_plan_wins_and_no_search_is_left_running():
    task = load_task(IPC / "logistics00" / "domain.pddl", IPC / "logistics00" / "probLOGISTICS-6-0.pddl")
    with FastDownward(workers=3) as fd:
        taken = []
        take = fd._searches.take
        fd._searches.take = lambda command: taken.append(take(command)) or taken[-1]
        outcome = fd.solve(PlanRequest(task=task), time.monotonic() + 30)
        assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
        assert list(outcome.details["searches"]) == ["lama-first", *RACE_ALIASES[:2]]
        assert outcome.details["searches"][outcome.details["search"]] == "plan found"
        # the deadline was 30 s away: a search still running lost the race, and says so
        assert "killed at the deadline" not in outcome.details["searches"].values(), outcome.details["searches"]
        assert all(
            v == f"stopped: {outcome.details['search']} found a plan first"
            for v in outcome.details["searches"].values()
            if v.startswith("stopped")
        )
        assert len(taken) == 3
        # winners exited, losers were killed when the plan came: reaped off the caller's path (the pool's thread)
        # a moment later, after which none is still a process
        for run in taken:
            wait_until(lambda: run.process.returncode is not None, 2, f"run {run.process.pid} to be reaped", every=0.01)
            with pytest.raises(ProcessLookupError):
                os.kill(run.process.pid, 0)
        assert fd.translations == 1


def test_tasks_with_costs_run_the_cost_searches_of_their_quality():
    task = bundled_task("tools", 3, seed=1)
    assert task.has_action_costs()
    # the search processes, not the in-process A* (tests/test_sas_astar.py)
    with FastDownward(workers=4, inprocess_max_operators=0) as fd:
        outcome = fd.solve(PlanRequest(task=task), time.monotonic() + 30)
        first = fd.solve(PlanRequest(task=task, quality="first"), time.monotonic() + 30)
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
    assert set(outcome.details["searches"]) == {"anytime-wastar", "seq-opt-lmcut"}  # a small task: A* races
    assert outcome.details["quality"] == "anytime" and outcome.details["optimal"] is True
    assert first.status is Status.SOLVED and set(first.details["searches"]) == {"lama-first", "lama-costs"}


def test_an_optimal_configuration_gives_optimal_plans_with_costs_too():
    """With costs, the optimal alias used to run beside lama-costs, whose satisficing plan was preferred."""
    task = bundled_task("tools", 2, seed=0)
    costs = {
        "(web-search job1 competitors web-basic)": 6.0,
        "(web-search job2 competitors web-basic)": 9.4,
        "(web-search job1 competitors web-pro)": 3.1,
        "(web-search job2 competitors web-pro)": 3.1,
        "(query-database job1 competitors db-news)": 3.0,
        "(query-database job2 competitors db-news)": 6.5,
        "(connect-database db-news)": 2.2,
        "(fact-check job1)": 2.1,
        "(fact-check job2)": 2.1,
    }
    request = PlanRequest(task=task, cost_function=lambda grounded: {g: costs.get(g, 8.0) for g in grounded})
    with FastDownward(alias="seq-opt-lmcut") as fd:
        outcome = fd.solve(request, time.monotonic() + 30)
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
    assert list(outcome.details["searches"]) == ["seq-opt-lmcut"]


def test_cli_rejects_a_worker_count_below_one():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "portfolio.cli",
            "plan",
            str(IPC / "blocks" / "domain.pddl"),
            str(IPC / "blocks" / "probBLOCKS-4-0.pddl"),
            "--fd-workers",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--fd-workers" in run.stderr and "Traceback" not in run.stderr
