"""One action spelling everywhere: a runtime hands each plan step back as the plan spelled it,
`"action": "(pick-up b)"`, over HTTP (/v1/steps), MCP (`record_steps`, the official SDK client), JSONL
(`portfolio traces import`) and Python (`StepRecord`), and the store holds the same steps as for `action` + `args`;
exported, they read back as the plan's own strings."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from pydantic import ValidationError
from support import REPO
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, mcp_record_steps, serve_in_thread, validated

from traces import StepRecord, TraceStore


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One service (traces on) and the plan it made: every interface records that plan's steps."""
    traces = tmp_path_factory.mktemp("spelling") / "traces.db"
    with serve_in_thread(config(traces=str(traces))) as (url, svc):
        plan = httpx.post(url + "/v1/plan", json={"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4}, timeout=60).json()
        assert plan["status"] == "solved" and validated(BLOCKS_DOMAIN, BLOCKS_4, plan["plan"])
        yield url, str(traces), plan["plan"]


def steps_of(plan: list[str], run_id: str) -> list[dict]:
    return [{"run_id": run_id, "step": i, "action": s, "outcome": "success"} for i, s in enumerate(plan)]


def via_http(url: str, traces: str, steps: list[dict], tmp_path) -> None:
    answer = httpx.post(url + "/v1/steps", json={"steps": steps}, timeout=30)
    assert answer.status_code == 200, answer.text


def via_mcp(url: str, traces: str, steps: list[dict], tmp_path) -> None:
    mcp_record_steps(url, steps)


def via_jsonl(url: str, traces: str, steps: list[dict], tmp_path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in steps))
    done = subprocess.run(
        [sys.executable, "-m", "portfolio.cli", "traces", "import", str(path), "--traces", traces],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr


def via_python(url: str, traces: str, steps: list[dict], tmp_path) -> None:
    with TraceStore(traces) as store:
        store.record_steps([StepRecord(**s) for s in steps])


@pytest.mark.parametrize("record", [via_http, via_mcp, via_jsonl, via_python], ids=lambda f: f.__name__[4:])
def test_plan_steps_recorded_in_the_plan_spelling_round_trip(server, record, tmp_path):
    url, traces, plan = server
    run_id = f"spelled-{record.__name__}"
    record(url, traces, steps_of(plan, run_id), tmp_path)
    with TraceStore(traces) as store:
        stored = [s for s in store.iter_steps() if s.run_id == run_id]
    assert [s.ground for s in stored] == plan  # and back in the plan's own spelling
    assert stored[0].action == plan[0].strip("()").split()[0] and stored[0].args == tuple(plan[0][1:-1].split()[1:])


def test_both_spellings_are_one_record_and_a_disagreement_is_refused():
    spelled = StepRecord(run_id="r", step=0, action="(Drive T1 a b)", outcome="success")
    split = StepRecord(run_id="r", step=0, action="drive", args=("t1", "a", "b"), outcome="success")
    assert spelled == split and spelled.ground == "(drive t1 a b)"
    assert StepRecord(run_id="r", step=0, action="(drive t1 a b)", args=["t1", "a", "b"], outcome="success") == split
    with pytest.raises(ValidationError, match="args says"):
        StepRecord(run_id="r", step=0, action="(drive t1 a b)", args=["t2"], outcome="success")
    with pytest.raises(ValidationError, match="not a grounded action"):
        StepRecord(run_id="r", step=0, action="(drive (t1))", outcome="success")
    # the schema HTTP, MCP and `portfolio schema step` publish says so
    assert '"(pick-up b)"' in StepRecord.model_json_schema()["properties"]["action"]["description"]
