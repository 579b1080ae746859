"""`portfolio plan --explain` and `Planner.explain`: under learned costs, the plan the task's own costs give beside
the learned one, and the evidence against each of its steps the learned plan avoided (the numbers `portfolio
costs` shows); without learned costs, that there is nothing learned to explain (and, for an unsolvable task, the
unsolvable explanation as before)."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from support import REPO, trained_store

from domains.bundled import write_instance
from domains.ground_text import parse_ground_action
from domains.load import load_task
from domains.validate import validate_plan
from portfolio.cli import main
from portfolio.cost_explain import NOTHING_LEARNED, avoided_steps
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from portfolio.engine.tiers import Tier

RISKY = "(web-search job1 competitors web-basic)"
CLASSICAL = ["--delegates", "fast-downward,pyperplan", "--budget", "10"]


@pytest.fixture(scope="module")
def broken_store(tmp_path_factory):
    """The cheap search engine failed 72 of its 80 recorded calls; a retrain has learned it."""
    runs = ((f"r{i}", ("job1", "competitors", "web-basic"), "failure" if i % 10 else "success", {}) for i in range(80))
    return trained_store(tmp_path_factory.mktemp("explain") / "traces.db", "web-search", runs)


@pytest.fixture
def tools(tmp_path):
    return tuple(map(str, write_instance("tools", 1, 0, tmp_path)))


def valid(domain: str, problem: str, plan: list[str]) -> bool:
    return validate_plan(load_task(domain, problem), [parse_ground_action(step) for step in plan]).ok


def plan_json(capsys, *args) -> tuple[int, dict]:
    code = main(["plan", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_avoided_step_is_named_with_its_evidence(broken_store, tools, capsys):
    code, answer = plan_json(capsys, *tools, "--traces", str(broken_store), "--explain", *CLASSICAL)
    assert code == 0 and answer["status"] == "solved"
    explain = answer.pop("explain")
    assert answer["cost_model"].startswith("learned:")  # the PlanResult's own fields are all still there
    assert explain["learned"] and explain["note"] is None and explain["learned_plan"] == answer["plan"]
    assert RISKY in explain["base_plan"] and RISKY not in answer["plan"]
    assert valid(*tools, explain["base_plan"]) and valid(*tools, answer["plan"])
    assert explain["base_cost"] < answer["cost"]  # base costs chose the cheap engine; its risk made it dear
    assert explain["base_success_probability"] < answer["success_probability"]
    risky = next(row for row in explain["avoided"] if row["action"] == RISKY)
    assert (risky["steps"], risky["failures"], risky["runs_ago"]) == (80, 72, 0)
    low, high = risky["p_fail_90"]
    assert low < risky["p_fail"] < high and risky["p_fail"] > 0.7
    assert [row["action"] for row in explain["avoided"]] == avoided_steps(explain["base_plan"], answer["plan"])

    # the same row `portfolio costs --json` shows for it, not a number of its own
    assert main(["costs", *tools, "--traces", str(broken_store), "--json"]) == 0
    shown = {row["action"]: row for row in json.loads(capsys.readouterr().out)}
    assert risky == shown[RISKY]


def test_the_plain_output_stays_a_plan_file_and_names_the_step(broken_store, tools, capsys):
    assert main(["plan", *tools, "--traces", str(broken_store), "--explain", *CLASSICAL]) == 0
    lines = capsys.readouterr().out.splitlines()
    plan = [line for line in lines if not line.startswith(";")]
    assert valid(*tools, plan) and RISKY not in plan
    comments = [line[2:] for line in lines if line.startswith("; ")]
    start = comments.index(next(c for c in comments if c.startswith("explain: the plan under base costs (cost ")))
    end = comments.index("explain: the learned plan avoids")
    base = [c.strip() for c in comments[start + 1 : end]]
    assert RISKY in base and valid(*tools, base)
    [evidence] = [c for c in comments if c.startswith(f"  {RISKY}: ")]
    assert "80 steps, 72 failures" in evidence and "last seen last run" in evidence
    assert "p_fail 0." in evidence and "(90% interval 0." in evidence


def test_the_base_cost_plan_is_not_recorded(broken_store, tools, tmp_path, capsys):
    store = tmp_path / "copy.db"
    store.write_bytes(broken_store.read_bytes())
    count = "SELECT count(*) FROM plans"
    with sqlite3.connect(store) as db:
        before = db.execute(count).fetchone()[0]
    assert main(["plan", *tools, "--traces", str(store), "--explain", *CLASSICAL]) == 0
    capsys.readouterr()
    with sqlite3.connect(store) as db:
        assert db.execute(count).fetchone()[0] == before + 1  # the learned plan only


def test_without_learned_costs_there_is_nothing_to_explain(tools, capsys):
    code, answer = plan_json(capsys, *tools, "--explain", *CLASSICAL)
    assert code == 0 and answer["explain"] == {
        "learned": False, "note": NOTHING_LEARNED, "base_status": None, "base_plan": [], "base_cost": None,
        "base_learned_cost": None, "base_success_probability": None, "learned_plan": [], "avoided": [],
    }  # fmt: skip
    assert valid(*tools, answer["plan"])
    assert main(["plan", *tools, "--explain", *CLASSICAL]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"; explain: {NOTHING_LEARNED}"


def test_an_unsolvable_task_still_says_why(capsys):
    rooms = REPO / "domains/examples/rooms"
    assert main(["plan", str(rooms / "domain.pddl"), str(rooms / "dark-c.pddl"), "--explain"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "; no plan: the task is unsolvable (proved)"
    assert lines[1].startswith("; (lit c) cannot be reached")
    assert lines[-1] == f"; explain: {NOTHING_LEARNED}"


def test_the_planner_explains_in_python(broken_store, tools):
    from portfolio.planner import Planner

    task = load_task(*tools)
    with Planner(["fast-downward", "pyperplan"], budget_s=10, traces=broken_store) as planner:
        result = planner.plan(task)
        explanation = planner.explain(task, result)
        base = planner.plan_base_costs(task)
    assert explanation.changed and explanation.base_plan == base.plan and base.cost_model == "task"
    assert RISKY in [row["action"] for row in explanation.avoided]
    with Planner(["fast-downward", "pyperplan"], budget_s=10) as planner:
        untrained = planner.explain(task, planner.plan(task))
    assert not untrained.learned and not untrained.changed and untrained.note == NOTHING_LEARNED


def test_the_explanation_prices_with_the_draw_the_plan_was_made_with(broken_store, tools, monkeypatch):
    """Thompson sampling draws fresh costs on every pricing: explaining must not draw again."""
    from portfolio.planner import Planner

    task = load_task(*tools)
    with Planner(["fast-downward"], budget_s=10, traces=broken_store, explore="thompson", seed=3) as planner:
        drawn = {}
        costs_for = planner._costs_for

        def recording(*args, **kwargs):
            costs = costs_for(*args, **kwargs)
            drawn.update(costs)
            return costs

        monkeypatch.setattr(planner, "_costs_for", recording)
        result = planner.plan(task)
        monkeypatch.undo()
        explanation = planner.explain(task, result)
    assert result.solved and drawn and result.learned_cost == round(sum(drawn[s].cost for s in result.plan), 6)
    assert explanation.base_plan and RISKY in explanation.base_plan
    assert explanation.base_learned_cost == round(sum(drawn[step].cost for step in explanation.base_plan), 6)
    assert explanation.avoided and all(
        row["cost"] == round(drawn[row["action"]].cost, 6) for row in explanation.avoided
    )


class Pricing(Delegate):
    """Prices the grounded actions it is given, as a cost-aware delegate does, and finds no plan."""

    name = "pricing"

    def __init__(self) -> None:
        self.grounded: list[str] = []
        self.given: list[dict[str, float]] = []

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        self.given.append(request.grounded_costs(self.grounded) or {})
        return DelegateOutcome(Status.INCOMPLETE, reason="it only prices")


def test_every_delegate_of_one_call_plans_with_one_thompson_draw(broken_store, tools):
    """The draw the first delegate was given is the one Fast Downward plans with after it, and the one the
    result is priced (and later explained) with."""
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.planner import Planner

    task = load_task(*tools)
    pricing, fast_downward = Pricing(), FastDownward(workers=1)
    pricing.grounded = fast_downward.grounded_actions(PlanRequest(task=task), time.monotonic() + 30)
    stages = [Tier("classical", [pricing, fast_downward], 20.0)]
    with Planner(stages, traces=broken_store, explore="thompson", seed=3) as planner:
        result = planner.plan(task)
    [given] = pricing.given
    assert result.solved and result.delegate in ("fast-downward", "fd-inprocess") and set(result.plan) <= set(given)
    assert result.learned_cost == round(sum(given[step] for step in result.plan), 6)


def test_avoided_steps_keep_base_plan_order_once_each():
    assert avoided_steps(["(a)", "(b)", "(a)", "(c)"], ["(c)"]) == ["(a)", "(b)"]
    assert avoided_steps(["(a)"], ["(a)", "(b)"]) == []


def test_no_base_cost_plan_means_nothing_to_compare():
    from portfolio.cost_explain import explain_learned_plan, explanation_lines
    from portfolio.engine.results import PlanResult, Status

    learned = PlanResult(status=Status.SOLVED, plan=["(a)"], cost=1.0)
    explanation = explain_learned_plan(learned, PlanResult(status=Status.TIMEOUT), {})
    assert explanation.learned and not explanation.changed and explanation.avoided == []
    assert explanation_lines(explanation) == ["explain: no plan under base costs (timeout): nothing to compare"]


def test_a_goal_that_already_holds_explains_that_nothing_changed():
    from portfolio.cost_explain import explain_learned_plan, explanation_lines
    from portfolio.engine.results import PlanResult, Status

    empty = PlanResult(status=Status.SOLVED, plan=[], cost=0.0)
    explanation = explain_learned_plan(empty, PlanResult(status=Status.SOLVED, plan=[], cost=0.0), {})
    assert explanation_lines(explanation) == [
        "explain: the plan under base costs is the same; learned costs changed nothing"
    ]
