"""The learned costs of a task's grounded actions over HTTP (`/v1/costs`) and MCP (`costs`): the same body, the same
answer, and what `portfolio costs` says."""

from __future__ import annotations

import pytest
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, over_http, over_mcp, serve_in_thread


@pytest.mark.parametrize("interface", [over_http, over_mcp], ids=["http", "mcp"])
def test_costs_list_every_grounded_action_dearest_first_once_a_model_exists(tmp_path, interface):
    from learning.retrain import retrain
    from traces.records import StepRecord
    from traces.store import TraceStore

    body = {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "weight": 5}
    path = tmp_path / "t.db"
    with serve_in_thread(config(traces=str(path))) as (url, _):
        before = interface(url)("costs", body)
    assert before == {"model_version": None, "costs": []}
    with TraceStore(path) as store:
        store.record_steps(
            StepRecord(run_id="r", step=i, action="pick-up", args=("b",), outcome="failure" if i % 2 else "success")
            for i in range(20)
        )
        retrain(store)
    with serve_in_thread(config(traces=str(path))) as (url, _):
        after = interface(url)("costs", body)
    rows = after["costs"]
    assert after["model_version"] == 1 and len(rows) > 10
    assert rows[0]["action"] == "(pick-up b)" and 0.3 < rows[0]["p_fail"] < 0.7
    assert [r["cost"] for r in rows] == sorted((r["cost"] for r in rows), reverse=True)
    assert all(r["cost"] >= r["base_cost"] for r in rows)
