"""The learned costs of a task's grounded actions over HTTP (`/v1/costs`) and MCP (`costs`): the same body, the same
answer, and what `portfolio costs` says."""

from __future__ import annotations

import pytest
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, over_http, over_mcp, serve_in_thread


@pytest.fixture(scope="module")
def before_and_after(tmp_path_factory):
    """(URL, URL): a server over a store with no model yet, and one over a store whose steps were retrained into a
    model before the server started. Both interfaces ask both servers (read-only calls): two servers for the
    module instead of two per interface."""
    from learning.retrain import retrain
    from traces.records import StepRecord
    from traces.store import TraceStore

    folder = tmp_path_factory.mktemp("costs")
    trained = folder / "trained.db"
    with TraceStore(trained) as store:
        store.record_steps(
            StepRecord(run_id="r", step=i, action="pick-up", args=("b",), outcome="failure" if i % 2 else "success")
            for i in range(20)
        )
        retrain(store)
    with (
        serve_in_thread(config(traces=str(folder / "empty.db"))) as (before, _),
        serve_in_thread(config(traces=str(trained))) as (after, _),
    ):
        yield before, after


@pytest.mark.parametrize("interface", [over_http, over_mcp], ids=["http", "mcp"])
def test_costs_list_every_grounded_action_riskiest_first_once_a_model_exists(before_and_after, interface):
    body = {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "weight": 5}
    before_url, after_url = before_and_after
    before = interface(before_url)("costs", body)
    assert before == {"model_version": None, "costs": []}
    after = interface(after_url)("costs", body)
    rows = after["costs"]
    assert after["model_version"] == 1 and len(rows) > 10
    assert rows[0]["action"] == "(pick-up b)" and 0.3 < rows[0]["p_fail"] < 0.7
    assert [r["p_fail"] for r in rows] == sorted((r["p_fail"] for r in rows), reverse=True)
    assert all(r["cost"] >= r["base_cost"] for r in rows)


COSTED_DOMAIN = """(define (domain errand) (:requirements :strips :action-costs)
  (:predicates (done))
  (:functions (total-cost) - number)
  (:action fast :parameters () :precondition () :effect (and (done) (increase (total-cost) 1)))
  (:action slow :parameters () :precondition () :effect (and (done) (increase (total-cost) 10))))"""
COSTED_PROBLEM = """(define (problem one) (:domain errand) (:init (= (total-cost) 0)) (:goal (done))
  (:metric minimize (total-cost)))"""


def test_the_cli_http_and_mcp_list_the_same_rows_in_the_same_order(tmp_path, capsys):
    """Riskiest first everywhere: `fast` fails half the time (cost 1 + 5 * 0.69) and `slow` never (cost 10);
    `portfolio costs` listed them by p_fail, HTTP and MCP by cost."""
    import json

    from learning.retrain import retrain
    from portfolio.cli import main
    from traces.records import StepRecord
    from traces.store import TraceStore

    path = tmp_path / "t.db"
    with TraceStore(path) as store:
        steps = [("fast", i % 2 == 1) for i in range(30)] + [("slow", False)] * 30
        store.record_steps(
            StepRecord(run_id="r", step=i, action=name, args=(), outcome="failure" if failed else "success")
            for i, (name, failed) in enumerate(steps)
        )
        retrain(store)
    (tmp_path / "d.pddl").write_text(COSTED_DOMAIN)
    (tmp_path / "p.pddl").write_text(COSTED_PROBLEM)
    capsys.readouterr()
    assert main(["costs", str(tmp_path / "d.pddl"), str(tmp_path / "p.pddl"), "--traces", str(path), "--json"]) == 0
    cli_rows = json.loads(capsys.readouterr().out)
    assert [row["action"] for row in cli_rows] == ["(fast)", "(slow)"] and cli_rows[0]["p_fail"] > 0.3
    fast = cli_rows[0]  # what the estimate rests on, the same on every interface (compared whole below)
    assert (fast["steps"], fast["failures"], fast["since_change"], fast["runs_ago"]) == (30, 15, 30, 0)
    assert fast["p_fail_90"][0] < fast["p_fail"] < fast["p_fail_90"][1] and fast["charge"] > 0
    body = {"domain": COSTED_DOMAIN, "problem": COSTED_PROBLEM, "weight": 5}
    with serve_in_thread(config(traces=str(path))) as (url, _):
        assert over_http(url)("costs", body)["costs"] == cli_rows
        assert over_mcp(url)("costs", body)["costs"] == cli_rows
