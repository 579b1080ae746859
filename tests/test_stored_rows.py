"""Stored rows that took planning down: a model nested too deep to parse (the workers crash-looped), metadata that
is not JSON (`serve` exited naming neither file nor row), a selection model this release cannot read (every plan
and every retrain failed), and a bad model deleted and retrained (its version came back, and the server stayed 503
until restarted). Each row is read with the file, table and row named; a worker loads without a bad model and
says so (503 with the reason, `degraded` health, one log line), a bad selection plans with the fixed order and a
retrain replaces it, and a model stored after a deleted one has a version of its own, which a running server
picks up."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3

import httpx
import pytest
from support import IPC, pick_up_model_store
from test_service_helpers import config, serve_in_thread, small_plan, wait_for

from learning import retrain
from learning.selection import load_selection
from portfolio.cli import main
from traces.selection import save_selection_model
from traces.store import TraceStore

DOMAIN, PROBLEM = str(IPC / "blocks" / "domain.pddl"), str(IPC / "blocks" / "probBLOCKS-4-0.pddl")
DEEP = b'{"format":"portfolio-planner/failure-model","format_version":2,"actions":' + b"[" * 100_000
DEEP += b"]" * 100_000 + b"}"
BAD_SELECTION = json.dumps(
    {
        "format": "portfolio-planner/selection-model",
        "format_version": 2,
        "params": {"min_tasks": 3},
        "domains": {"d": [{"": {"operators": "many", "times": {"lama-first": [1.0]}}}]},
    }
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store with failure model version 1 (blocks' pick-up fails one time in five on b)."""
    return pick_up_model_store(tmp_path_factory.mktemp("rows") / "traces.db")


def copy_with(tmp_path, trained, sql: str, *values) -> str:
    """A copy of the trained store with `sql` run on it (before any server opens it)."""
    path = tmp_path / "edited.db"
    shutil.copy(trained, path)
    with sqlite3.connect(path) as db:
        db.execute(sql, values)
    db.close()
    return str(path)


def served_plans_are_refused_naming(url: str, svc, *names: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(3):
            answer = client.post("/v1/plan", json=small_plan())
            assert answer.status_code == 503, answer.text
            assert answer.json()["kind"] == "ModelFormatError", answer.text
            assert all(name in answer.json()["error"] for name in names), answer.text
        health = client.get("/v1/health").json()
        assert health["status"] == "degraded" and any("models" in r for r in health["reasons"]), health
    assert svc.pool.last_failure is None  # no worker died or was replaced


def test_a_model_nested_too_deep_is_a_clear_error_and_no_worker_dies(tmp_path, trained, capfd):
    path = copy_with(tmp_path, trained, "UPDATE models SET blob = ? WHERE version = 1", DEEP)
    assert main(["costs", DOMAIN, PROBLEM, "--traces", path]) == 2
    err = capfd.readouterr().err
    assert path in err and "models" in err and "version 1" in err and "Traceback" not in err, err
    with serve_in_thread(config(traces=path, workers=2)) as (url, svc):
        served_plans_are_refused_naming(url, svc, "models", "version 1")
    logged = capfd.readouterr().err
    assert 1 <= logged.count("cannot use the stored model") <= 2, logged  # once a worker
    assert "Traceback" not in logged and "RecursionError" not in logged, logged


def test_metadata_that_is_not_json_names_the_file_table_and_row(tmp_path, trained, capsys):
    path = copy_with(tmp_path, trained, "UPDATE models SET metadata = ? WHERE version = 1", '{"format": bad')
    assert main(["costs", DOMAIN, PROBLEM, "--traces", path]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in (path, "models", "version 1", "metadata")), err
    assert "Traceback" not in err
    with serve_in_thread(config(traces=path)) as (url, svc):  # the server starts and says what is wrong
        served_plans_are_refused_naming(url, svc, "models", "version 1", "metadata")


def test_a_bad_selection_model_plans_with_the_fixed_order_and_a_retrain_replaces_it(tmp_path, trained, caplog):
    path = copy_with(
        tmp_path,
        trained,
        "INSERT INTO selection_models (created, version, metadata, model) VALUES ('2026-01-01', 1, '{}', ?)",
        BAD_SELECTION,
    )
    from portfolio.planner import Planner

    with caplog.at_level(logging.WARNING):
        with Planner(["fast-downward"], traces=path) as planner:
            assert planner.selection is None
            result = planner.plan(planner_task())
    assert result.solved
    warned = [r.getMessage() for r in caplog.records if "selection" in r.getMessage()]
    assert warned and all(name in warned[0] for name in (path, "selection_models", "version 1")), warned
    assert "fixed order" in warned[0]
    with serve_in_thread(config(traces=path)) as (url, _):
        with httpx.Client(base_url=url, timeout=60) as client:
            answer = client.post("/v1/plan", json=small_plan())
            assert answer.status_code == 200 and answer.json()["status"] == "solved", answer.text
            job = client.post("/v1/retrain").json()
            wait_for(lambda: client.get(f"/v1/jobs/{job['id']}").json()["status"] != "running", 120, "the retrain")
            done = client.get(f"/v1/jobs/{job['id']}").json()
            assert done["status"] == "done", done
            assert done["result"]["selection"]["version"] == 2  # stored although no domain has enough tasks
            assert client.post("/v1/plan", json=small_plan()).json()["status"] == "solved"
    with TraceStore(path) as store:
        assert load_selection(store).domains_ == {}  # the broken one is superseded: no warning from now on


def planner_task():
    from domains.load import load_task

    return load_task(DOMAIN, PROBLEM)


def test_versions_are_never_issued_twice(tmp_path, trained):
    path = tmp_path / "t.db"
    shutil.copy(trained, path)
    with TraceStore(path) as store:
        assert retrain(store).version == 2
        store._write(lambda: store.db.execute("DELETE FROM models WHERE version = 2"))
        assert retrain(store).version == 3
        store.prune_models(1)
        store._write(lambda: store.db.execute("DELETE FROM models"))
        assert retrain(store).version == 4
        assert save_selection_model(store, "{}", {}) == 1
        store._write(lambda: store.db.execute("DELETE FROM selection_models"))
        assert save_selection_model(store, "{}", {}) == 2


def test_a_bad_model_deleted_and_retrained_elsewhere_reaches_the_running_server(tmp_path, trained):
    path = tmp_path / "t.db"
    shutil.copy(trained, path)
    with TraceStore(path) as store:
        assert retrain(store).version == 2
        store._write(lambda: store.db.execute("UPDATE models SET blob = ? WHERE version = 2", [b"{damaged"]))
    with serve_in_thread(config(traces=str(path), workers=2)) as (url, _):
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.post("/v1/plan", json=small_plan()).status_code == 503
            # the operator's remedy, on the store the server is using (one connection per process: through it)
            with TraceStore(path) as store:
                store._write(lambda: store.db.execute("DELETE FROM models WHERE version = 2"))
                assert retrain(store).version == 3
            wait_for(lambda: client.post("/v1/plan", json=small_plan()).status_code == 200, 30, "a plan")
            assert all(client.post("/v1/plan", json=small_plan()).status_code == 200 for _ in range(4))
            wait_for(lambda: client.get("/v1/health").json()["status"] == "ok", 30, "ok health")
