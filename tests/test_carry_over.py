"""Carry-over at the tier boundary: Fast Downward's work goes on past its share beside the later delegates, the
first valid plan wins, the rest is stopped, the cascade's total deadline holds and nothing is left running.

Tasks (times measured here, 2 cores under load): termes p01 (ipc-more) takes Fast Downward ~4.4 s (translation
0.4 s, lama-first's search the rest), so a 0.5 s classical tier never solves it, even on a machine 3x faster;
blocks 9-0 takes pyperplan 0.5 s and a blind A* search more than 8 s; the largest parking problem's translation
alone takes ~10 s. The decomposer tier is a stub where the test needs one that cannot solve the task: it waits
out its budget as a slow LLM would, through `portfolio.engine.cancel` like every blocking wait in the real delegates.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from support import IPC, IPC_MORE, descendants, hardest_parking, load_ipc

from domains.load import load_task
from domains.validate import validate_plan
from portfolio.delegates.fast_downward import translate as translate_worker
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.pyperplan import Pyperplan
from portfolio.engine import cancel
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from portfolio.engine.tiers import Tier
from portfolio.engine.workers import BudgetExpired, WorkerProcess


def termes():
    folder = IPC_MORE / "termes-sat18-strips"
    return load_task(folder / "domain.pddl", folder / "p01.pddl")


class Sleeper(Delegate):
    """A decomposer-tier delegate that finds nothing: it waits until its deadline, or until it is stopped."""

    budget_s = None
    source = "decomposition"

    def __init__(self, name: str = "sleeper", give_up: bool = False) -> None:
        self.name = name
        self.give_up = give_up  # return at once instead of waiting
        self.stopped: bool | None = None
        self.waited = 0.0

    def supports(self, task) -> bool:
        return True

    def warm_up(self) -> None:
        pass

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        started = time.monotonic()
        if self.give_up:
            return DelegateOutcome(Status.INCOMPLETE, reason="gave up")
        self.stopped = cancel.sleep_until(deadline)
        self.waited = time.monotonic() - started
        return DelegateOutcome(Status.TIMEOUT, reason="slept")

    def close(self) -> None:
        pass


def cascade(classical, decomposer, classical_s: float = 0.5, decomposer_s: float = 20.0, **options):
    return PortfolioDecomposition(
        [Tier("classical", classical, classical_s), Tier("decomposer", decomposer, decomposer_s)], **options
    )


def busy_cpu(delegates, seconds: float = 0.5) -> float:
    """CPU seconds this process's descendants use over the next `seconds`, once the delegates' replacement
    workers (started where one was killed) have finished importing: idle workers use none."""
    for delegate in delegates:
        worker = getattr(delegate, "_worker", None)
        if hasattr(delegate, "_translator"):  # Fast Downward: its translator worker
            worker = delegate._translator()
        if worker is not None:
            worker.call("ping", time.monotonic() + 30)
    pids = descendants()
    before = sum(cpu for _, cpu in pids.values())
    time.sleep(seconds)
    return sum(cpu for _, cpu in (descendants().get(pid, ("", 0.0)) for pid in pids)) - before


def solved_by(planner: PortfolioDecomposition, task, delegate: str):
    """(result, seconds) of a call that must end with a valid plan from `delegate`."""
    started = time.monotonic()
    result = planner.solve(PlanRequest(task))
    elapsed = time.monotonic() - started
    assert result.solved and result.delegate == delegate, summary(result)
    assert validate_plan(task, result.actions()).ok
    return result, elapsed


def summary(result) -> list[tuple[str, str, bool]]:
    return [(a.delegate, a.status.value, bool(a.details.get("background"))) for a in result.attempts]


@pytest.mark.serial
def test_carried_over_plan_wins_while_the_decomposer_tier_runs():
    task = termes()
    sleeper = Sleeper()
    classical = [FastDownward(), Pyperplan()]
    planner = cascade(classical, [sleeper])
    try:
        result, elapsed = solved_by(planner, task, "fast-downward")
        first, *_ = result.attempts
        assert first.status is Status.TIMEOUT and first.details["carried_over"] is True
        assert first.elapsed_ms < 1000  # what a caller of the 1 s tier saw: no answer within its share
        assert ("fast-downward", "solved", True) in summary(result)
        # The decomposer tier ran meanwhile and was stopped when the plan came, long before its 20 s.
        assert sleeper.stopped is True and result.attempts[-1].details["stopped_by"] == "fast-downward"
        assert elapsed < 15, elapsed
        assert busy_cpu(classical) < 0.1  # nothing left working
    finally:
        planner.close()


@pytest.mark.serial  # asserts the 0.5 + 2 s deadline
def test_opt_out_kills_the_work_at_the_end_of_its_share():
    task = termes()
    sleeper = Sleeper()
    planner = cascade([FastDownward(), Pyperplan()], [sleeper], decomposer_s=2.0, carry_over=False)
    try:
        started = time.monotonic()
        result = planner.solve(PlanRequest(task))
        elapsed = time.monotonic() - started
        assert result.status is Status.TIMEOUT, summary(result)
        assert [a.delegate for a in result.attempts] == ["fast-downward", "pyperplan", "sleeper"]
        assert "budget expired" in result.attempts[0].reason and not result.attempts[0].details.get("carried_over")
        assert sleeper.stopped is False and sleeper.waited > 1.5  # nothing cut its wait short
        assert elapsed < 0.5 + 2.0 + 0.5, elapsed
    finally:
        planner.close()


def test_the_cascade_waits_for_carried_over_work_when_the_later_delegates_give_up():
    task = termes()
    planner = cascade([FastDownward()], [Sleeper(give_up=True)])
    try:
        result, _ = solved_by(planner, task, "fast-downward")
        assert summary(result) == [
            ("fast-downward", "timeout", False),
            ("sleeper", "incomplete", False),
            ("fast-downward", "solved", True),
        ]
    finally:
        planner.close()


@pytest.mark.serial  # asserts the answer comes long before the 8 s search ends
def test_a_foreground_plan_stops_the_carried_over_search():
    task = load_ipc("blocks", "probBLOCKS-9-0.pddl")
    blind = FastDownward(search="astar(blind())", workers=1)  # > 8 s on this task
    late = Pyperplan(name="late-pyperplan")
    planner = cascade([blind], [late], classical_s=0.3)
    try:
        result, elapsed = solved_by(planner, task, "late-pyperplan")
        background = result.attempts[-1]
        assert background.details["background"] and background.details["stopped_by"] == "late-pyperplan"
        assert background.status is Status.TIMEOUT
        assert elapsed < 5, elapsed
        assert busy_cpu([blind, late]) < 0.1  # the blind search was killed, not left to run
    finally:
        planner.close()


@pytest.mark.serial
def test_total_deadline_holds_and_nothing_is_left_running():
    task = load_ipc("parking-sat11-strips", hardest_parking())
    fast_downward = FastDownward()
    classical = [fast_downward, Pyperplan()]
    planner = cascade(classical, [Sleeper()], classical_s=0.5, decomposer_s=1.0)
    try:
        translator = fast_downward._translator()
        translator.call("ping", time.monotonic() + 30)
        killed_pid = translator.pid
        started = time.monotonic()
        result = planner.solve(PlanRequest(task))
        elapsed = time.monotonic() - started
        assert result.status is Status.TIMEOUT, summary(result)
        assert elapsed <= 1.5 + 0.3, elapsed  # the total deadline, with time to kill
        assert ("fast-downward", "timeout", True) in summary(result)  # recorded, honestly, at the deadline
        assert killed_pid not in descendants()  # the translator that was still working was killed
        assert busy_cpu(classical) < 0.1
    finally:
        planner.close()


def test_a_translation_under_way_is_made_once_for_two_callers():
    task = load_task(IPC_MORE / "grid" / "domain.pddl", IPC_MORE / "grid" / "prob03.pddl")  # ~2 s to translate
    with FastDownward() as fast_downward:
        fast_downward.warm_up()
        found = []
        callers = [
            threading.Thread(
                target=lambda: found.append(fast_downward.translate(PlanRequest(task), time.monotonic() + 60))
            )
            for _ in range(2)
        ]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert fast_downward.translations == 1
        assert len(found) == 2 and all(translation.sas is not None for translation, _ in found)


@pytest.mark.serial  # asserts the call ends within 2 s of a stop at 0.3 s
def test_a_stop_signal_ends_a_worker_call_before_its_deadline():
    task = load_ipc("parking-sat11-strips", hardest_parking())  # ~10 s to translate
    signal = cancel.StopSignal()
    worker = WorkerProcess(preload=translate_worker.PRELOAD)
    try:
        threading.Timer(0.3, signal.set).start()
        started = time.monotonic()
        with cancel.scope(signal), pytest.raises(BudgetExpired):
            worker.call(
                translate_worker.TRANSLATE_OP,
                time.monotonic() + 60,
                domain_pddl=task.domain_pddl,
                problem_pddl=task.problem_pddl,
            )
        assert time.monotonic() - started < 2.0
    finally:
        worker.close()
        signal.close()


@pytest.mark.serial
def test_service_worker_kills_carried_over_work_at_the_request_deadline(tmp_path: Path):
    from portfolio.serve.worker import PlannerWorker, WorkerConfig

    parking = IPC / "parking-sat11-strips"
    config = WorkerConfig(
        delegates=["fast-downward", "pyperplan", "goal-agenda"],
        budget_s=5.0,
        decomposer_budget_s=0.5,
        memory_limit_mb=2048,
        translation_cache=False,
    )
    worker = PlannerWorker(config)
    try:
        body = {
            "domain": (parking / "domain.pddl").read_text(),
            "problem": hardest_parking().read_text(),
            "budget": 0.4,
        }
        started = time.monotonic()
        answer = worker.plan(body)
        elapsed = time.monotonic() - started
        result = answer["result"]
        assert result["status"] == "timeout", result["attempts"]
        # The request's deadline is its own 0.4 s plus the decomposer tier's 0.5 s, not the server's 5 s.
        assert elapsed < 0.9 + 0.6, elapsed
        assert result["attempts"][0]["details"]["carried_over"] is True
        assert any(a["details"].get("background") for a in result["attempts"])
        assert busy_cpu(worker.planner._all_delegates()) < 0.1
    finally:
        worker.planner.close()


@pytest.mark.serial  # asserts when the wait ends, both ways
def test_past_the_answer_deadline_the_first_plan_ends_the_wait():
    """With costs, the cost-aware search's plan is preferred for a grace period of twice the time taken; work
    carried over past its share (`race_after`) returns the first plan instead (exit code 0: a plan)."""
    from portfolio.delegates.fast_downward.search_run import _wait
    from portfolio.engine.search_pool import SearchRun

    def pair():
        return [
            ("cost-blind", SearchRun(subprocess.Popen(["sleep", "1"]), "", "")),
            ("cost-aware", SearchRun(subprocess.Popen(["sleep", "30"]), "", "")),
        ]

    for race_after, low, high in ((None, 2.5, 6.0), (0.3, 0.9, 1.8)):
        runs = pair()
        started = time.monotonic()
        try:
            codes = _wait(runs, started + 10, started, race_after=None if race_after is None else started + race_after)
        finally:
            for _, run in runs:
                run.process.kill()
                run.process.wait()
        elapsed = time.monotonic() - started
        assert codes == {"cost-blind": 0, "cost-aware": None}
        assert low <= elapsed <= high, (race_after, elapsed)


def test_service_metrics_count_only_real_hand_overs():
    from portfolio.serve.metrics import Metrics
    from traces.attempt_details import AttemptDetails, StoredAttempt

    def attempt(delegate, status, **details):
        return StoredAttempt(delegate=delegate, status=status, details=AttemptDetails(**details))

    metrics = Metrics()
    metrics.observe_plan(
        {
            "status": "solved",
            "delegate": "fast-downward",
            "elapsed_ms": 5000,
            "attempts": [
                attempt("fast-downward", "timeout", carried_over=True),
                attempt("pyperplan", "timeout"),
                attempt("fast-downward", "solved", background=True),
                attempt("goal-agenda", "timeout", stopped_by="fast-downward"),
            ],
        }
    )
    metrics.observe_plan(
        {
            "status": "solved",
            "delegate": "goal-agenda",
            "elapsed_ms": 3000,
            "attempts": [
                attempt("fast-downward", "timeout", carried_over=True),
                attempt("pyperplan", "timeout"),
                attempt("goal-agenda", "solved"),
                attempt("fast-downward", "timeout", background=True, stopped_by="goal-agenda"),
            ],
        }
    )
    text = metrics.render().decode()
    counted = {
        line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("portfolio_cascade_fallthroughs_total{")
    }
    assert counted == {'delegate="fast-downward",status="timeout"': 2.0, 'delegate="pyperplan",status="timeout"': 2.0}
