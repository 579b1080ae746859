"""A trace store that cannot be written or read: `/v1/health` says `degraded` and why (it said `ok` while every
route answered 500), a plan without a run id is still answered (planning needs no disk), and no answer names the
store's file or directory (`/v1/health` needs no token; the path is logged on the server instead).

A full disk is SQLite's page limit (`PRAGMA max_page_count`) on the server's connection, with every table's last
page filled: the next write that needs a page fails with SQLITE_FULL, as on a full disk. Damage is a store whose
later pages (the steps' rows and indexes) were overwritten with garbage."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import httpx
import pytest
from test_service_helpers import config, serve_in_thread, small_plan, wait_for

from portfolio.serve.worker import PlannerWorker, WorkerConfig
from traces import DiskFullError, StepRecord, TraceStore
from traces.task_sources import remember_task_source

FILLERS = {  # the smallest row each table takes
    "runs": "INSERT INTO runs (id) VALUES (?)",
    "plans": "INSERT INTO plans (run_id, attempts, plan) VALUES (?, '[]', '[]')",
    "task_sources": "INSERT INTO task_sources (key, source) VALUES (?, '{}')",
    "run_tasks": "INSERT INTO run_tasks (run_id, key) VALUES (?, 'k')",
    "steps": "INSERT INTO steps (run_id, step, action, args, features, outcome) "
    "VALUES (?, 0, 'a', '[]', '{}', 'success')",
}


def steps(prefix: str, n: int) -> list[StepRecord]:
    return [StepRecord(run_id=f"{prefix}{i // 10}", step=i % 10, action="pick-up", args=("b",), outcome="success")
            for i in range(n)]  # fmt: skip


def fill_up(store: TraceStore) -> None:
    """Hold the file at its size and fill each table's last page: the next row any table takes needs a page."""
    shared = store._shared
    with shared.lock:
        assert shared.conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        pages = shared.conn.execute("PRAGMA page_count").fetchone()[0]
        assert shared.conn.execute(f"PRAGMA max_page_count = {pages}").fetchone()[0] == pages
    for table, sql in FILLERS.items():
        for i in itertools.count():
            try:
                store._write(lambda: store.db.execute(sql, [f"filler-{table}-{i}"]))
            except DiskFullError:
                break


def lift_limit(store: TraceStore) -> None:
    with store._shared.lock:
        store._shared.conn.execute("PRAGMA max_page_count = 1073741823")


def path_forms(path: Path) -> list[str]:
    """Every spelling of the store's location an answer could carry."""
    forms = {str(path), os.path.abspath(path), os.path.realpath(path)}
    return sorted(forms | {os.path.dirname(form) for form in forms})


def named(text: str, path: Path) -> list[str]:
    return [form for form in path_forms(path) if form in text]


def store_with_steps(tmp_path: Path, n: int = 0) -> Path:
    path = tmp_path / "store" / "traces.db"
    path.parent.mkdir()
    with TraceStore(path) as store:
        if n:
            store.record_steps(steps("old", n))
        # a task source that fills most of its table's first page: the next one needs a page of its own
        remember_task_source(store, "earlier", {"domain": "x" * 3500})
    return path


def test_a_full_store_is_degraded_health_and_plans_without_a_run_id_are_still_answered(tmp_path):
    path = store_with_steps(tmp_path, 50)
    with serve_in_thread(config(traces=str(path))) as (url, svc):
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.get("/v1/health").json()["status"] == "ok"
            fill_up(svc.store)
            wait_for(lambda: client.get("/v1/health").json()["status"] == "degraded", 10, "degraded health")
            health = client.get("/v1/health")
            assert any("written" in reason for reason in health.json()["reasons"]), health.text
            refused = client.post("/v1/steps", json={"steps": [s.model_dump(mode="json") for s in steps("new", 200)]})
            assert refused.status_code == 500 and refused.json()["kind"] == "DiskFullError", refused.text
            planned = client.post("/v1/plan", json=small_plan())
            assert planned.status_code == 200 and planned.json()["status"] == "solved", planned.text
            metrics = client.get("/metrics").text
            assert 'portfolio_store_write_failures_total{kind="DiskFullError"}' in metrics
            answers = [health.text, refused.text, planned.text, client.get("/v1/health").text]
            assert not named(" ".join(answers), path), answers
            lift_limit(svc.store)  # space again: the next write succeeds and health says ok
            assert client.post("/v1/steps", json={"steps": [steps("new", 1)[0].model_dump(mode="json")]}).is_success
            wait_for(lambda: client.get("/v1/health").json()["status"] == "ok", 10, "ok health")


def test_a_worker_answers_a_plan_without_a_run_id_when_its_store_is_full(tmp_path, caplog):
    """The planner worker's own recording: a plan the client gave no run id is answered, the failure reported to
    the server (`store_error`) and logged once; a plan under the client's run id is refused before planning."""
    path = store_with_steps(tmp_path)
    worker = PlannerWorker(
        WorkerConfig(delegates=["fast-downward"], budget_s=10, decomposer_budget_s=1, traces=str(path),
                     memory_limit_mb=4096, translation_cache=False)
    )  # fmt: skip
    try:
        fill_up(worker.planner.store)
        body = small_plan() | {"run_id": "server-made"}
        with caplog.at_level("WARNING"):
            for _ in range(2):
                answer = worker.plan(body, must_record=False)
                assert answer["result"]["status"] == "solved" and answer["result"]["run_id"] == "server-made"
                assert answer["store_error"]["kind"] == "DiskFullError", answer
        assert len([r for r in caplog.records if "not recorded" in r.getMessage()]) == 1, caplog.text
        refused = worker.plan(small_plan() | {"run_id": "client-made"}, must_record=True)
        assert refused["store_failed"]["kind"] == "DiskFullError" and "result" not in refused, refused
    finally:
        worker.planner.close()


def damage(path: Path, share: float = 0.5) -> None:
    """Overwrite the last `share` of the file's pages (the steps' rows and index pages: they were written last)
    with garbage; the schema and the first pages stay readable, so the store still opens."""
    size = path.stat().st_size
    page = 4096
    pages = size // page
    rng = random.Random(7)
    with open(path, "r+b") as file:
        for number in range(int(pages * (1 - share)), pages):
            file.seek(number * page)
            file.write(rng.randbytes(page))


def test_damaged_pages_are_degraded_health_and_no_answer_names_the_store(tmp_path):
    path = store_with_steps(tmp_path, 3000)
    damage(path)
    with serve_in_thread(config(traces=str(path))) as (url, svc):
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_for(lambda: client.get("/v1/health").json()["status"] == "degraded", 10, "degraded health")
            health = client.get("/v1/health")
            assert any("damaged" in reason for reason in health.json()["reasons"]), health.text
            actions = client.get("/v1/actions")
            assert actions.status_code == 500 and actions.json()["kind"] == "CorruptDatabaseError", actions.text
            recorded = client.post("/v1/steps", json={"steps": [s.model_dump(mode="json") for s in steps("new", 50)]})
            assert recorded.status_code == 500, recorded.text
            job = client.post("/v1/retrain").json()
            wait_for(lambda: client.get(f"/v1/jobs/{job['id']}").json()["status"] != "running", 60, "the retrain")
            retrained = client.get(f"/v1/jobs/{job['id']}")
            assert retrained.json()["status"] == "failed", retrained.text
            replanned = client.post("/v1/replan", json={"run_id": "old1", "state": []})
            answers = [health.text, actions.text, recorded.text, retrained.text, replanned.text]
            assert not named(" ".join(answers), path), answers


@pytest.fixture
def bad_model_store(tmp_path):
    from learning import retrain

    path = store_with_steps(tmp_path, 40)
    with TraceStore(path) as store:
        retrain(store)
        store._write(lambda: store.db.execute("UPDATE models SET metadata = '{bad'"))
    return path


def test_a_bad_models_reason_names_its_row_but_not_the_file(bad_model_store):
    with serve_in_thread(config(traces=str(bad_model_store))) as (url, _):
        with httpx.Client(base_url=url, timeout=60) as client:
            refused = client.post("/v1/plan", json=small_plan())
            health = client.get("/v1/health")
    assert refused.status_code == 503 and "table models, version 1" in refused.json()["error"], refused.text
    assert health.json()["status"] == "degraded" and "table models, version 1" in health.text, health.text
    assert not named(refused.text + health.text, bad_model_store)
