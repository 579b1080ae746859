"""Learned costs in a world that changes: change points cut a grounding's record where its rate broke or
recovered, evidence of what the plans avoid goes stale so it is tried again, and a lone tool's own record says
whether it is broken. Through the model, the typed agent loop (nothing imported from outside), and the CLI
(old failures and recent successes imported, then `retrain`). Real SQLite and Fast Downward; plans validated."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from support import portfolio

from domains.bundled import write_instance
from domains.bundled.tools_sim import News, Person, Request, WriteUp
from domains.ground_text import parse_ground_action
from domains.load import load_task
from domains.model import GroundAction
from domains.typed_actions import action
from domains.validate import validate_plan
from learning.changes import current_segment
from learning.model import FailureModel
from traces.records import StepRecord

REPO = Path(__file__).resolve().parents[1]
TOOL = GroundAction("wire", ())


def steps(outcomes, action=TOOL, first_run=0):
    return [
        StepRecord(run_id=f"r{first_run + i}", step=0, action=action.name, args=action.args,
                   outcome="failure" if failed else "success")
        for i, failed in enumerate(outcomes)
    ]  # fmt: skip


def test_a_break_and_a_recovery_are_cut_and_a_stationary_record_is_not():
    assert current_segment([0] * 50 + [1, 1]).start == 50  # two failures after 50 successes
    assert current_segment([1, 1, 1] + [0] * 10).start == 3  # ten successes after three failures
    assert current_segment([0] * 60 + [1] * 5 + [0] * 8).start == 65  # the recovery after an outage
    rng = np.random.default_rng(0)
    for rate in (0.02, 0.3, 0.5):
        cut = [current_segment((rng.random(300) < rate).astype(np.uint8)).start > 0 for _ in range(100)]
        assert sum(cut) <= 5, rate  # 0-2% measured (learning.changes)


def test_a_lone_tool_that_failed_3_of_3_is_more_likely_broken_than_not():
    model = FailureModel().fit(steps([1, 1, 1]))
    assert model.predict_proba([TOOL])[0] >= 0.5


def test_a_lone_tool_failing_half_its_calls_is_priced_near_a_half_after_20_calls():
    """Over 40 seeds of 20 calls at 0.5: the price follows each record (within 0.1 of its own rate) and is 0.5
    within 0.1 on average, where the optimistic prior's 10 pseudo-steps alone left it at 0.18-0.47."""
    prices, gaps = [], []
    for seed in range(40):
        rng = random.Random(seed)
        outcomes = [rng.random() < 0.5 for _ in range(20)]
        p = FailureModel().fit(steps(outcomes)).predict_proba([TOOL])[0]
        prices.append(p)
        gaps.append(abs(p - sum(outcomes) / 20))
    assert abs(np.mean(prices) - 0.5) <= 0.1 and max(gaps) <= 0.1, (np.mean(prices), max(gaps))


def test_a_repaired_road_is_judged_on_the_runs_since_and_the_record_says_so():
    rng = random.Random(1)
    road, other = GroundAction("drive", ("t", "x", "y")), GroundAction("drive", ("t", "y", "z"))
    history = []
    for i in range(300):
        history += [
            StepRecord(run_id=f"a{i}", step=0, action="drive", args=road.args,
                       outcome="failure" if rng.random() < 0.8 else "success"),
            StepRecord(run_id=f"a{i}", step=1, action="drive", args=other.args, outcome="success"),
        ]  # fmt: skip
    history += [
        StepRecord(run_id=f"b{i}", step=0, action="drive", args=road.args, outcome="success") for i in range(133)
    ]
    model = FailureModel().fit(history)
    assert model.predict_proba([road])[0] < 0.05
    (evidence,) = model.predict_evidence([road])
    assert evidence is not None and evidence.steps == 433 and evidence.failures > 200
    assert evidence.since_change <= 140 and evidence.failures_since == 0 and evidence.changes >= 1
    assert evidence.runs_ago == 0 and evidence.weight == 1.0
    assert FailureModel(change_odds=None).fit(history).predict_proba([road])[0] > 0.3  # without the cut


def test_a_cell_split_by_a_numeric_feature_reports_its_changes_once():
    """A numeric feature gives one cell's steps several raw rows: the kin group's one change is reported once,
    not once a row."""
    history = [
        StepRecord(run_id=f"r{i}", step=0, action="wire", outcome="failure" if i >= 50 else "success",
                   features={"load": i % 3})
        for i in range(53)
    ]  # fmt: skip
    (evidence,) = FailureModel().fit(history).predict_evidence([TOOL])
    assert evidence is not None and evidence.changes == 1 and evidence.since_change == 3


def test_evidence_of_a_tool_no_longer_used_goes_stale_towards_the_prior():
    """Used in 50 runs, broke (3 failures), then 200 runs of other work: its price drifts back towards the prior
    so a plan tries it again; without staleness it stays condemned."""
    history = steps([0] * 50 + [1, 1, 1])
    history += steps([0] * 200, GroundAction("other", ()), first_run=53)
    fresh = FailureModel().fit(history[:53]).predict_proba([TOOL])[0]
    stale = FailureModel().fit(history).predict_proba([TOOL])[0]
    kept = FailureModel(stale_half_life=None).fit(history).predict_proba([TOOL])[0]
    assert fresh > 0.6 and kept > 0.6 and stale < 0.15, (fresh, stale, kept)
    (evidence,) = FailureModel().fit(history).predict_evidence([TOOL])
    assert evidence is not None and evidence.runs_ago == 200 and evidence.weight < 0.01


def test_a_record_with_no_change_in_it_does_not_go_stale():
    """A tool that failed from its first call, then 200 runs of other work: it stays condemned (re-trying what
    never worked is regret paid for nothing: docs/decisions/aging-evidence.md); one that worked first, then
    broke, drifts back."""
    never = steps([1, 1, 1, 1]) + steps([0] * 200, GroundAction("other", ()), first_run=4)
    broke = steps([0] * 30 + [1, 1, 1]) + steps([0] * 200, GroundAction("other", ()), first_run=33)
    assert FailureModel().fit(never).predict_proba([TOOL])[0] > 0.6
    assert FailureModel().fit(broke).predict_proba([TOOL])[0] < 0.15
    (evidence,) = FailureModel().fit(never).predict_evidence([TOOL])
    assert evidence is not None and evidence.changes == 0 and evidence.weight == 1.0


def test_an_action_never_recorded_does_not_drag_down_a_plan_whose_recorded_steps_all_succeeded():
    history = [
        StepRecord(run_id=f"r{i}", step=j, action=f"act{j}", outcome="success") for i in range(20) for j in range(5)
    ]
    model = FailureModel().fit(history)
    unseen = model.predict_proba([GroundAction(f"new{j}", ()) for j in range(14)])
    assert np.prod(1.0 - unseen) > 0.8  # 14 such steps were 0.49 at the optimistic prior's 0.05 each


class Switch:
    down = False


def wire_tools(switch: type[Switch]):
    @action(cost=1.0)
    def find_person(request: Request) -> Person:
        return Person(request.text.split()[-1])

    @action(cost=1.0)
    def fetch_wire(person: Person) -> News:
        if switch.down:
            raise TimeoutError("news wire did not answer within 2 s")
        return News("wire", (f"{person.name} opens new lab",))

    @action(cost=1.5)
    def fetch_archive(person: Person) -> News:
        return News("archive", (f"{person.name}: a profile",))

    @action(cost=1.0, goal=True)
    def write_up(person: Person, news: News) -> WriteUp:
        return WriteUp(f"{person.name} ({news.source})")

    return [find_person, fetch_wire, fetch_archive, write_up]


@pytest.mark.slow
def test_a_break_and_a_recovery_through_the_typed_agent_loop_with_nothing_imported(tmp_path):
    """The agent retrains after every run. The wire works for 10 runs, is down for 15, then works again: the
    plans leave it within 3 of its failures and use it again within 20 runs of its recovery, by re-trying it on
    their own (nothing is imported or told)."""
    from portfolio.agent import Agent

    class Wire(Switch):
        pass

    firsts: list[str] = []
    failures_after_break = 0
    with Agent(
        wire_tools(Wire), traces=tmp_path / "traces.db", cost_weight=2.0, backoff_s=0.0, max_retries=0, learn_every=1
    ) as agent:
        for run in range(45):
            Wire.down = 10 <= run < 25
            result = agent.run(Request("About Hopper"), goal=WriteUp)
            assert result.succeeded, result.reason
            firsts.append(result.plans[0][1])
            if Wire.down:
                failures_after_break += sum(s.action == "(fetch-wire)" and s.outcome != "success" for s in result.steps)
                if firsts[-1] != "(fetch-wire)":
                    break_left = run
        costs = agent.costs(Request("About Hopper"), goal=WriteUp)
    assert firsts[:10] == ["(fetch-wire)"] * 10
    left_after = [f for f in firsts[10:25]].index("(fetch-archive)")
    assert sum(f == "(fetch-wire)" for f in firsts[10 : 10 + left_after]) <= 3, firsts
    assert break_left >= 10
    back = [i for i, f in enumerate(firsts[25:]) if f == "(fetch-wire)"]
    assert back and back[0] <= 20, firsts[25:]
    assert failures_after_break <= 10  # leaving plus re-trying while it was down
    assert costs["(fetch-wire)"].evidence is not None and costs["(fetch-wire)"].interval is not None


def test_a_recovery_through_the_cli_old_failures_then_recent_successes_imported(tmp_path):
    """web-basic failed 8 of 8 a month ago (imported): the plan takes web-pro. Ten recent successes imported,
    `retrain`: the plan returns to web-basic, and `costs` says what the estimate rests on."""
    basic, pro = "(web-search job1 competitors web-basic)", "(web-search job1 competitors web-pro)"
    store = tmp_path / "traces.db"
    old = [
        {
            "run_id": f"old{i}",
            "step": 0,
            "action": basic,
            "outcome": "failure",
            "timestamp": f"2026-11-0{1 + i % 8}T10:00:00Z",
        }
        for i in range(8)
    ]
    new = [
        {
            "run_id": f"new{i}",
            "step": 0,
            "action": basic,
            "outcome": "success",
            "timestamp": f"2026-12-{10 + i}T10:00:00Z",
        }
        for i in range(10)
    ]
    domain, problem = write_instance("tools", 1, 0, tmp_path)
    task = load_task(domain, problem)

    def planned() -> list[str]:
        run = portfolio("plan", domain, problem, "--traces", store, "--budget", "10", "--json")
        assert run.returncode == 0, run.stderr
        plan = json.loads(run.stdout)["plan"]
        assert validate_plan(task, [parse_ground_action(s) for s in plan]).ok
        return plan

    for rows, name in ((old, "old.jsonl"), (new, "new.jsonl")):
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert portfolio("traces", "import", tmp_path / "old.jsonl", "--traces", store).returncode == 0
    assert portfolio("retrain", "--traces", store).returncode == 0
    before = planned()
    assert pro in before and basic not in before
    assert portfolio("traces", "import", tmp_path / "new.jsonl", "--traces", store).returncode == 0
    assert portfolio("retrain", "--traces", store).returncode == 0
    after = planned()
    assert basic in after and pro not in after
    rows = {r["action"]: r for r in json.loads(portfolio("costs", domain, problem, "--traces", store, "--json").stdout)}
    row = rows[basic]
    assert (row["steps"], row["failures"], row["since_change"], row["failures_since"]) == (18, 8, 10, 0)
    assert row["last_seen"] == "2026-12-19T10:00:00Z" and row["runs_ago"] == 0
    low, high = row["p_fail_90"]
    assert low <= row["p_fail"] <= high < 0.5
    assert rows[pro]["steps"] == 0 and rows[pro]["runs_ago"] is None
    table = portfolio("costs", domain, problem, "--traces", store).stdout
    assert "90% interval" in table and "2026-12-19T10:00:00Z (last run)" in table and "never" in table


def test_a_break_seen_in_one_situation_prices_the_grounding_in_the_others_it_was_not_seen_in_since():
    """A road that broke while it rained is broken in the sun too, until a sunny drive says otherwise: a cell
    with no step since its grounding's change rests on the grounding's record since, not on the prior."""
    roads = [("t", "x", "y"), ("t", "y", "z"), ("t", "z", "w"), ("t", "w", "v")]
    history = [
        StepRecord(run_id=f"r{i}", step=j, action="drive", args=road, outcome="success",
                   features={"weather": "sun" if i % 2 else "rain"})
        for i in range(40) for j, road in enumerate(roads)
    ]  # fmt: skip
    history += [
        StepRecord(run_id=f"b{i}", step=0, action="drive", args=roads[0], outcome="failure",
                   features={"weather": "rain"})
        for i in range(3)
    ]  # fmt: skip
    model = FailureModel().fit(history)
    road = GroundAction("drive", roads[0])
    rain, sun = (float(model.predict_proba([road], {"weather": w})[0]) for w in ("rain", "sun"))
    assert rain > 0.5 and sun > 0.5, (rain, sun)
    assert float(model.predict_proba([GroundAction("drive", roads[2])], {"weather": "sun"})[0]) < 0.1  # no sibling
    (evidence,) = model.predict_evidence([road], {"weather": "sun"})
    assert evidence is not None and evidence.changes == 1 and evidence.since_change == 0


def test_a_lone_tool_broken_in_one_situation_is_priced_in_another_as_in_one_never_seen():
    history = [
        StepRecord(run_id=f"r{i}", step=0, action="wire", outcome="success",
                   features={"weather": "sun" if i % 2 else "rain"})
        for i in range(20)
    ]  # fmt: skip
    history += [
        StepRecord(run_id=f"b{i}", step=0, action="wire", outcome="failure", features={"weather": "rain"})
        for i in range(3)
    ]  # fmt: skip
    model = FailureModel().fit(history)
    sun, snow = (float(model.predict_proba([TOOL], {"weather": w})[0]) for w in ("sun", "snow"))
    assert sun > 0.5 and sun == snow, (sun, snow)  # no call in the sun since the break, none ever in the snow
