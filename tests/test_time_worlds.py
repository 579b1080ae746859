"""The time objective's benchmark worlds (`portfolio.benchsuite.worlds.timed`) execute plans as the agent loop
does: transient failures retried up to the limit, side-effect failures never retried, plan-ending failures
replanned around; every arm sees the same attempts."""

from __future__ import annotations

from domains.bundled import bundled_task
from domains.ground_text import parse_ground_action
from portfolio.benchsuite.worlds.timed import MAX_RETRIES, REPLAN_MS, attempt, marginal, run_episode, truth

TASK = bundled_task("tools", 1, 0)
WEB = parse_ground_action("(web-search job1 competitors web-basic)")
PRO = parse_ground_action("(web-search job1 competitors web-pro)")
ROUTE = [parse_ground_action(s) for s in ("(fact-check job1)", "(write-report job1 writer-small)")]


def planner(calls: list):
    def plan(task, state, excluded):
        calls.append(list(excluded))
        return [PRO if WEB in excluded else WEB, *ROUTE]

    return plan


def test_sticky_outage_is_retried_to_the_limit_then_planned_around():
    down = next(i for i in range(50) if all(attempt("sticky", "w", i, WEB, k).failed for k in range(3)))
    calls: list = []
    episode = run_episode("sticky", "w", down, TASK, planner(calls))
    tries = [a for a in episode.attempts if a.step == WEB]
    assert len(tries) == MAX_RETRIES + 1 and [a.ends_plan for a in tries] == [False, False, True]
    assert calls == [[], [WEB]] and episode.reached
    assert episode.ms == sum(a.ms for a in episode.attempts) + REPLAN_MS


def test_a_side_effect_failure_is_never_retried_and_attempts_are_common_to_arms():
    small = ROUTE[1]
    index = next(i for i in range(50) if attempt("side-effects", "w", i, small, 0).failed)
    episode = run_episode("side-effects", "w", index, TASK, planner([]))
    failed = [a for a in episode.attempts if a.failed and a.step == small]
    assert failed and failed[0].side_effects and failed[0].ends_plan and episode.side_effect_failures >= 1
    assert attempt("speed", "w", 3, WEB, 1) == attempt("speed", "w", 3, WEB, 1)
    assert truth("speed", PRO).success_ms > 10 * truth("speed", WEB).success_ms
    assert marginal("sticky", WEB).p_fail > truth("sticky", WEB).p_fail
