"""The HTTP service over real HTTP (httpx against uvicorn on a free 127.0.0.1 port, real planner workers, real
SQLite): plans, replans, the validator as a critic, steps, jobs, retraining, OpenAPI, metrics, error bodies."""

from __future__ import annotations

import json

import httpx
import pytest
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, serve_in_thread, small_plan, validated, wait_for

from domains.model import Atom


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    traces = tmp_path_factory.mktemp("svc") / "traces.db"
    with serve_in_thread(config(workers=2, traces=str(traces))) as (url, svc):
        with httpx.Client(base_url=url, timeout=60) as client:
            yield client, svc


STATE = ["(clear a)", "(on a b)", "(ontable b)", "(clear c)", "(ontable c)", "(clear d)", "(ontable d)", "(handempty)"]


def atoms(texts):
    return frozenset(Atom(t.strip("()").split()[0], tuple(t.strip("()").split()[1:])) for t in texts)


def test_plan_pddl_texts_and_from_another_state(service):
    client, _ = service
    answer = client.post("/v1/plan", json=small_plan())
    assert answer.status_code == 200
    result = answer.json()
    assert result["status"] == "solved" and result["run_id"]
    assert validated(BLOCKS_DOMAIN, BLOCKS_4, result["plan"])
    replan = client.post("/v1/plan", json={**small_plan(), "init": STATE}).json()
    assert replan["status"] == "solved"
    assert validated(BLOCKS_DOMAIN, BLOCKS_4, replan["plan"], init=atoms(STATE))


def test_plan_json_task_keeps_the_cli_json_shape(service):
    from dataclasses import fields

    from portfolio.engine.results import PlanResult

    client, _ = service
    task = json.loads(open("domains/examples/blocks-task.json").read())
    result = client.post("/v1/plan", json={"task": task}).json()
    assert result["status"] == "solved"
    assert {f.name for f in fields(PlanResult)} | {"run_id"} == set(result)


def test_replan_from_the_observed_state_of_a_run(service):
    client, svc = service
    first = client.post("/v1/plan", json=small_plan()).json()
    answer = client.post("/v1/replan", json={"run_id": first["run_id"], "state": STATE})
    assert answer.status_code == 200
    replan = answer.json()
    assert replan["run_id"] == first["run_id"] and replan["status"] == "solved"
    assert validated(BLOCKS_DOMAIN, BLOCKS_4, replan["plan"], init=atoms(STATE))
    assert len(svc.store.plans(first["run_id"])) == 2  # both plans recorded under the run
    missing = client.post("/v1/replan", json={"run_id": "no-such-run", "state": STATE})
    assert missing.status_code == 404 and missing.json()["kind"] == "NotFound"


@pytest.mark.parametrize(
    "body, kind",
    [
        (b"{not json", "BadRequest"),
        ({"domain": "(define (domain d)", "problem": "(define (problem p))"}, "PDDLSyntaxError"),
        ({"task": {"objects": 3}}, "SchemaError"),
        ({}, "BadRequest"),
        ({"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "init": ["(floating a)"]}, "UndefinedSymbolError"),
        ({"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "budget": -1}, "SchemaError"),
        ({"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "excluded": ["(pick-up (a))"]}, "PDDLSyntaxError"),
    ],
)
def test_bad_input_is_a_400_with_a_message_and_kind(service, body, kind):
    client, _ = service
    if isinstance(body, bytes):
        answer = client.post("/v1/plan", content=body, headers={"Content-Type": "application/json"})
    else:
        answer = client.post("/v1/plan", json=body)
    assert answer.status_code == 400
    payload = answer.json()
    assert payload["kind"] == kind and payload["error"]


def test_validate_gives_the_verdict_and_a_precise_critique(service):
    client, _ = service
    good = ["(pick-up b)", "(stack b a)", "(pick-up c)", "(stack c b)", "(pick-up d)", "(stack d c)"]
    verdict = client.post("/v1/validate", json={**small_plan(), "plan": good}).json()
    assert verdict["valid"] is True and verdict["steps"] == 6 and verdict["cost"] == 6
    bad = client.post("/v1/validate", json={**small_plan(), "plan": ["(pick-up b)", "(pick-up c)"]}).json()
    assert bad["valid"] is False and bad["failed_step"] == 2 and bad["problem"] == "precondition"
    assert "(handempty)" in bad["missing"] and "step 2" in bad["message"]
    short = client.post("/v1/validate", json={**small_plan(), "plan": good[:2]}).json()
    assert short["valid"] is False and short["problem"] == "goal" and short["failed_step"] is None
    garbled = client.post("/v1/validate", json={**small_plan(), "plan": ["(pick-up b"]})
    assert garbled.status_code == 400 and garbled.json()["kind"] == "PlanSyntaxError"


def test_steps_are_recorded_and_actions_report_stats_and_p_fail_after_retraining(service):
    client, svc = service
    steps = [
        {
            "run_id": "svc",
            "step": i,
            "action": "drive",
            "args": ["t1", "a", "b"],
            "outcome": "failure" if i % 2 else "success",
        }
        for i in range(20)
    ]
    steps += [
        {"run_id": "svc", "step": 20 + i, "action": "walk", "args": ["a", "b"], "outcome": "success"} for i in range(20)
    ]
    answer = client.post("/v1/steps", json={"steps": steps})
    assert answer.status_code == 200 and answer.json() == {"recorded": 40, "skipped": 0, "conflicts": []}
    assert svc.store.count_steps("drive") == 20
    bad = client.post("/v1/steps", json={"steps": [{"run_id": "svc"}]})
    assert bad.status_code == 400 and bad.json()["kind"] == "SchemaError"

    job = client.post("/v1/retrain", json={})
    assert job.status_code == 202 and job.headers["location"] == f"/v1/jobs/{job.json()['id']}"
    wait_for(lambda: client.get(job.headers["location"]).json()["status"] != "running", what="retrain job")
    done = client.get(job.headers["location"]).json()
    assert done["status"] == "done", done
    assert done["result"]["version"] >= 1

    listing = client.get("/v1/actions").json()
    assert listing["model_version"] == done["result"]["version"]
    by_name = {row["action"]: row for row in listing["actions"]}
    assert by_name["drive"]["failures"] == 10 and by_name["walk"]["failures"] == 0
    assert by_name["drive"]["p_fail"] > by_name["walk"]["p_fail"]
    # the workers plan with the new model: success probabilities appear on plans
    assert 0.0 < client.post("/v1/plan", json=small_plan()).json()["success_probability"] <= 1.0

    # a model trained elsewhere on the same store (`portfolio retrain`) is noticed within a second or so
    from learning.retrain import retrain
    from traces.store import TraceStore

    with TraceStore(svc.config.traces) as other:
        newer = retrain(other).version
    wait_for(
        lambda: client.get("/v1/actions").json()["model_version"] == newer,
        timeout=10,
        what="the service to notice the new model",
    )


def test_concurrent_step_batches_and_plans_all_land(service):
    """Batches posted at once from many clients, with plans being recorded by the workers meanwhile: every
    acknowledged step is in the store (one server connection behind a lock, one transaction per batch)."""
    import concurrent.futures

    client, svc = service
    before = svc.store.count_steps("grab")

    def post(batch: int) -> int:
        steps = [{"run_id": f"c{batch}", "step": i, "action": "grab", "outcome": "success"} for i in range(25)]
        return client.post("/v1/steps", json={"steps": steps}).json()["recorded"]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        plans = [pool.submit(client.post, "/v1/plan", json=small_plan()) for _ in range(4)]
        recorded = sum(pool.map(post, range(40)))
        assert all(p.result().json()["status"] == "solved" for p in plans)
    assert recorded == 1000 and svc.store.count_steps("grab") - before == 1000


def test_a_plan_submitted_without_waiting_is_a_job(service):
    client, _ = service
    answer = client.post("/v1/plan", json={**small_plan(), "wait": False})
    assert answer.status_code == 202
    location = answer.headers["location"]
    wait_for(lambda: client.get(location).json()["status"] != "running", what="plan job")
    job = client.get(location).json()
    assert job["status"] == "done" and job["kind"] == "plan"
    assert job["result"]["status"] == "solved" and validated(BLOCKS_DOMAIN, BLOCKS_4, job["result"]["plan"])
    assert client.get("/v1/jobs/nope").status_code == 404


def test_openapi_document_and_docs(service):
    client, _ = service
    document = client.get("/openapi.json").json()
    for route in (
        "/v1/plan",
        "/v1/replan",
        "/v1/validate",
        "/v1/steps",
        "/v1/actions",
        "/v1/retrain",
        "/v1/jobs/{job_id}",
        "/v1/health",
    ):
        assert route in document["paths"], route
    assert "PlanBody" in document["components"]["schemas"]
    assert client.get("/docs").status_code == 200


def test_metrics_count_requests_plans_and_steps(service):
    client, _ = service
    client.post("/v1/plan", json=small_plan())
    client.post("/v1/steps", json={"steps": [{"run_id": "m", "step": 0, "action": "walk", "outcome": "success"}]})
    text = client.get("/metrics").text
    assert 'portfolio_requests_total{route="/v1/plan",status="200"}' in text
    assert 'portfolio_plan_seconds_count{delegate="fast-downward",outcome="solved"}' in text
    assert "portfolio_steps_recorded_total" in text and "portfolio_queue_depth" in text
    steps = float(
        next(line.split()[-1] for line in text.splitlines() if line.startswith("portfolio_steps_recorded_total"))
    )
    assert steps >= 1


def test_a_trace_store_error_is_a_json_answer_not_a_dropped_connection(service, monkeypatch):
    from traces.errors import DatabaseLockedError

    client, svc = service

    def locked(records, **options):
        raise DatabaseLockedError("database is locked after 10 retries")

    monkeypatch.setattr(svc.store, "record_steps", locked)
    answer = client.post("/v1/steps", json={"steps": [{"run_id": "x", "step": 0, "action": "a", "outcome": "success"}]})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert answer.json()["kind"] == "DatabaseLockedError"

    def broken(**filters):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(svc.store, "stats", broken)
    answer = client.get("/v1/actions")
    assert answer.status_code == 500 and answer.json()["kind"] == "InternalError"
    assert "disk on fire" in answer.json()["error"]


def test_no_route_and_no_store_answers(service):
    client, _ = service
    assert client.get("/v1/nothing").json()["kind"] == "NotFound"
    with serve_in_thread(config(traces=None)) as (url, _):
        answer = httpx.post(url + "/v1/steps", json={"steps": []}, timeout=30)
        assert answer.status_code == 400 and "--traces" in answer.json()["error"]


def test_retrain_also_fits_the_configuration_selection(tmp_path):
    """`POST /v1/retrain` fitted only the failure model; `portfolio retrain` also fits the per-domain ranking of
    Fast Downward's searches, which the workers then race. One worker racing two searches records which won."""
    from test_service_helpers import IPC

    with (
        serve_in_thread(config(workers=1, fd_workers=2, traces=str(tmp_path / "t.db"))) as (url, _),
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        for name in ("probBLOCKS-4-0", "probBLOCKS-4-1", "probBLOCKS-4-2", "probBLOCKS-5-0"):
            problem = (IPC / "blocks" / f"{name}.pddl").read_text()
            answer = client.post("/v1/plan", json={"domain": BLOCKS_DOMAIN, "problem": problem}).json()
            assert answer["status"] == "solved"
        steps = [{"run_id": "svc", "step": 0, "action": "pick-up", "args": ["a"], "outcome": "success"}]
        assert client.post("/v1/steps", json={"steps": steps}).status_code == 200
        job = client.post("/v1/retrain", json={})
        wait_for(lambda: client.get(job.headers["location"]).json()["status"] != "running", what="retrain job")
        done = client.get(job.headers["location"]).json()
        assert done["status"] == "done", done
        selection = done["result"]["selection"]
        assert selection["version"] == 1 and len(selection["domains"]) == 1
        (ranked,) = selection["domains"].values()
        assert ranked["tasks"] == 4
    from learning.selection import load_selection
    from traces.store import TraceStore

    with TraceStore(tmp_path / "t.db") as store:  # stored where every worker's planner loads it from
        stored = load_selection(store)
    assert stored is not None and list(stored.domains_) == list(selection["domains"])


def test_a_run_planned_before_a_restart_can_still_be_replanned(tmp_path):
    """The task of a run is kept in the trace store beside its plans: a second server on the same file (after a
    restart, or beside the first) replans it. Before, runs lived only in the first server's memory: 404."""
    traces = str(tmp_path / "traces.db")
    with serve_in_thread(config(workers=1, traces=traces)) as (url, _):
        with httpx.Client(base_url=url, timeout=60) as client:
            first = client.post("/v1/plan", json=small_plan()).json()
            again = client.post("/v1/plan", json={**small_plan(), "run_id": first["run_id"]}).json()
    assert first["status"] == again["status"] == "solved"
    with serve_in_thread(config(workers=1, traces=traces)) as (url, svc):
        with httpx.Client(base_url=url, timeout=60) as client:
            answer = client.post("/v1/replan", json={"run_id": first["run_id"], "state": STATE})
            assert answer.status_code == 200
            replan = answer.json()
            assert replan["run_id"] == first["run_id"] and replan["status"] == "solved"
            assert validated(BLOCKS_DOMAIN, BLOCKS_4, replan["plan"], init=atoms(STATE))
            assert len(svc.store.plans(first["run_id"])) == 3  # the first server's two, this one's
            job = client.post("/v1/replan", json={"run_id": first["run_id"], "state": STATE, "wait": False})
            assert job.status_code == 202
            missing = client.post("/v1/replan", json={"run_id": "no-such-run", "state": STATE})
            assert missing.status_code == 404 and "trace store" in missing.json()["error"]
    # one copy of the task's text, however many runs and plans
    import sqlite3

    with sqlite3.connect(traces) as db:
        assert db.execute("SELECT count(*) FROM task_sources").fetchone()[0] == 1
        assert db.execute("SELECT count(*) FROM run_tasks").fetchone()[0] == 1
