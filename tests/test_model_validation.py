"""A stored model that was hand-edited or damaged: checked on load against `learning.storage.StoredModel`, a
clear error (exit 2 on the CLI, 503 with the reason from the service, `degraded` health), never a traceback
at prediction time nor a worker crash loop."""

from __future__ import annotations

import copy
import json
import sqlite3

import httpx
import pytest
from support import IPC, pick_up_model_store
from test_service_helpers import config, serve_in_thread, small_plan

from learning import retrain
from portfolio.cli import main
from traces.records import StepRecord
from traces.store import TraceStore

DOMAIN, PROBLEM = str(IPC / "blocks" / "domain.pddl"), str(IPC / "blocks" / "probBLOCKS-4-0.pddl")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store with a model of blocks actions (picking up b fails one time in five)."""
    path = pick_up_model_store(tmp_path_factory.mktemp("model") / "traces.db")
    with TraceStore(path) as store:
        document = json.loads(bytes(store.latest_model().blob))
    return path, document


def set_path(document: dict, path: tuple, value) -> dict:
    edited = copy.deepcopy(document)
    target = edited
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return edited


EDITS = [  # (where, new value): the report's edits that gave tracebacks or were silently used
    (("n_steps",), "many"),
    (("params", "prior_mean"), "abc"),
    (("params", "prior_mean"), 1.5),
    (("params", "min_samples"), -1),
    (("actions", "pick-up", "strength"), 0),
    (("actions", "pick-up", "strength"), -5),
    (("actions", "pick-up", "cells", "a|"), [1.0, 0.0]),
    (("actions", "pick-up", "weights", "g:a"), "heavy"),
    (("actions", "pick-up", "kind"), "neural"),
    (("actions", "pick-up", "base_rate"), None),
]


def store_with(tmp_path, trained, edit) -> str:
    source, document = trained
    path = tmp_path / "edited.db"
    path.write_bytes(source.read_bytes())
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE models SET blob = ? WHERE version = (SELECT max(version) FROM models)",
            (json.dumps(set_path(document, *edit)).encode(),),
        )
    return str(path)


@pytest.mark.parametrize("edit", EDITS, ids=lambda edit: ".".join(edit[0]) + "=" + repr(edit[1]))
def test_an_edited_model_is_exit_2_naming_the_field(tmp_path, trained, capsys, edit):
    assert main(["costs", DOMAIN, PROBLEM, "--traces", store_with(tmp_path, trained, edit)]) == 2
    err = capsys.readouterr().err
    assert edit[0][-1] in err and "portfolio retrain" in err and "Traceback" not in err, err


def test_the_untouched_model_still_loads(trained, capsys):
    assert main(["costs", DOMAIN, PROBLEM, "--traces", str(trained[0]), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert any(row["p_fail"] is not None for row in rows)


def test_plan_with_a_zero_strength_is_exit_2_not_a_crash(tmp_path, trained, capsys):
    edited = store_with(tmp_path, trained, (("actions", "pick-up", "strength"), 0))
    assert main(["plan", DOMAIN, PROBLEM, "--traces", edited]) == 2
    assert "strength" in capsys.readouterr().err


def test_served_a_bad_model_is_a_503_with_the_reason_and_degraded_health_not_a_crash_loop(tmp_path, trained):
    edited = store_with(tmp_path, trained, (("n_steps",), "many"))
    with serve_in_thread(config(traces=edited)) as (url, svc):
        with httpx.Client(base_url=url, timeout=60) as client:
            for _ in range(3):
                answer = client.post("/v1/plan", json=small_plan())
                assert answer.status_code == 503, answer.text
                assert answer.json()["kind"] == "ModelFormatError" and "n_steps" in answer.json()["error"]
            health = client.get("/v1/health").json()
            assert health["status"] == "degraded" and any("n_steps" in r for r in health["reasons"])
            actions = client.get("/v1/actions")
            assert actions.status_code == 503 and "n_steps" in actions.json()["error"]
            assert svc.pool.last_failure is None  # no worker died or was replaced
            assert client.post("/v1/validate", json={**small_plan(), "plan": []}).status_code == 200


def test_one_tenants_bad_model_is_a_503_for_its_plans_alone_and_read_again_at_each_call(tmp_path):
    """Tenant a's stored model is damaged, b's is sound: a's plans are 503 naming the field, b's are planned
    under b's model by the same worker, and a's plans succeed once a readable model of a is stored (the worker
    tries the store again at a's next call, without a restart)."""
    from portfolio.serve.keys import add_key

    path = tmp_path / "tenants.db"
    with TraceStore(path) as store:
        keys = {tenant: add_key(store, f"agent-{tenant}", tenant, "plan,read") for tenant in "ab"}
        for tenant in "ab":
            runs = [f"@{tenant}/run-{i}" for i in range(5)]
            store.record_steps(
                StepRecord(run_id=r, step=0, action="pick-up", args=("c",), outcome="success") for r in runs
            )
            retrain(store, tenant=tenant)
        bad = store.latest_model_version("a")
        document = json.loads(bytes(store.latest_model("a").blob))
    with sqlite3.connect(path) as db:
        edited = json.dumps(set_path(document, ("n_steps",), "many")).encode()
        db.execute("UPDATE models SET blob = ? WHERE version = ?", (edited, bad))
    with serve_in_thread(config(traces=str(path), workers=1)) as (url, svc):
        with httpx.Client(base_url=url, timeout=60) as client:

            def plan(tenant: str) -> httpx.Response:
                return client.post("/v1/plan", json=small_plan(), headers={"Authorization": f"Bearer {keys[tenant]}"})

            for tenant in "aba":
                answer = plan(tenant)
                if tenant == "a":
                    assert answer.status_code == 503, answer.text
                    assert answer.json()["kind"] == "ModelFormatError" and "n_steps" in answer.json()["error"]
                else:
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["cost_model"].startswith(f"learned:{svc.store.latest_model_version('b')}:")
            health = client.get("/v1/health").json()  # b's plans do not hide a's refusal
            assert health["status"] == "degraded" and any("n_steps" in r for r in health["reasons"])
            assert not any("'a'" in r for r in health["reasons"])  # health needs no token: no tenant named
            with TraceStore(path) as store:
                store.record_steps(
                    [StepRecord(run_id="@a/more", step=0, action="pick-up", args=("c",), outcome="success")]
                )
                fixed = retrain(store, tenant="a").version
            answer = plan("a")  # the server's model version has not moved yet: the worker reads a's again anyway
            assert answer.status_code == 200, answer.text
            assert answer.json()["cost_model"].startswith(f"learned:{fixed}:")
            assert client.get("/v1/health").json()["status"] == "ok"
            assert svc.pool.last_failure is None  # no worker died or was replaced
