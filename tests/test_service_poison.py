"""Learning that one client cannot poison, on a real server: the poison guard holds back the fabricated failures
one principal posts over HTTP and the tenant's costs stay where they were; releasing them is an admin's call;
on a server that pools every tenant's steps (--pool-learning) the guard is what keeps another tenant's
fabrications out, and a retrain's job shows each tenant only its own principals' held batches.
"""

from __future__ import annotations

import httpx
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, serve_in_thread, wait_for

TASK = {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4}


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def post(url: str, key: str, outcomes: str, prefix: str) -> None:
    """One step of (pick-up b) per run: 'f' a failure, 's' a success."""
    steps = [
        {"run_id": f"{prefix}-{i}", "step": 0, "action": "(pick-up b)", "outcome": "failure" if o == "f" else "success"}
        for i, o in enumerate(outcomes)
    ]
    answer = httpx.post(url + "/v1/steps", json={"steps": steps}, headers=bearer(key), timeout=30)
    assert answer.status_code == 200 and answer.json()["recorded"] == len(steps), answer.text


def retrain(url: str, key: str, **body) -> dict:
    """The retrain's job as the key's tenant sees it, once done."""
    answer = httpx.post(url + "/v1/retrain", json=body, headers=bearer(key), timeout=30)
    assert answer.status_code == 202, answer.text
    job = answer.json()["id"]

    def done() -> dict | None:
        found = httpx.get(url + f"/v1/jobs/{job}", headers=bearer(key), timeout=30).json()
        return found if found["status"] != "running" else None

    wait_for(lambda: done() is not None, what="the retrain")
    found = done()
    assert found is not None and found["status"] == "done", found
    return found["result"]


def p_fail(url: str, key: str) -> float:
    rows = httpx.post(url + "/v1/costs", json=TASK, headers=bearer(key), timeout=60).json()["costs"]
    return next(row["p_fail"] for row in rows if row["action"] == "(pick-up b)")


def keys_of(db: str, tenants: dict[str, str]) -> dict[str, str]:
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    with TraceStore(db) as store:
        return {
            name: add_key(store, name, tenant, "admin" if name.startswith("admin") else "plan,steps:write,read,learn")
            for name, tenant in tenants.items()
        }


def honest(url: str, keys: dict[str, str]) -> None:
    """200 steps of (pick-up b) from two principals, 4 failures."""
    for name in ("agent-1", "agent-2"):
        post(url, keys[name], ("s" * 49 + "f") * 2, name)


def test_one_principals_fabricated_failures_are_held_back_until_an_admin_releases_them(tmp_path):
    db = str(tmp_path / "t.db")
    keys = keys_of(db, {"agent-1": "acme", "agent-2": "acme", "intruder": "acme", "admin-1": "acme"})
    with serve_in_thread(config(traces=db)) as (url, _):
        honest(url, keys)
        first = retrain(url, keys["agent-1"])
        assert first["tenant"] == "acme" and first["held"] == []
        before = p_fail(url, keys["agent-1"])
        assert 0.01 < before < 0.04

        post(url, keys["intruder"], "f" * 300, "forged")
        result = retrain(url, keys["intruder"])
        assert [(h["principal"], h["action"], h["steps"], h["failures"]) for h in result["held"]] == [
            ("intruder", "(pick-up b)", 300, 300)
        ]
        assert result["version"] > first["version"] and result["n_steps"] == 200
        assert p_fail(url, keys["agent-2"]) == before

        refused = httpx.post(url + "/v1/retrain", json={"include_held": True}, headers=bearer(keys["agent-1"]))
        assert refused.status_code == 403 and "'admin'" in refused.json()["error"]
        released = retrain(url, keys["admin-1"], include_held=True)
        assert released["held"] == [] and released["n_steps"] == 500
        assert p_fail(url, keys["agent-1"]) > 0.8


def test_a_pooled_server_keeps_another_tenants_fabrications_out_and_shows_each_tenant_its_own(tmp_path):
    db = str(tmp_path / "t.db")
    keys = keys_of(db, {"agent-1": "a", "agent-2": "a", "intruder": "b"})
    with serve_in_thread(config(traces=db, pool_learning=True)) as (url, service):
        honest(url, keys)
        assert retrain(url, keys["intruder"])["tenant"] == "*"  # one model, of every tenant's steps
        before = p_fail(url, keys["agent-1"])
        assert p_fail(url, keys["intruder"]) == before  # tenant b plans with the same model

        post(url, keys["intruder"], "f" * 300, "forged")
        seen_by_a = retrain(url, keys["agent-1"])
        assert seen_by_a["held"] == []  # held, but not a's to see: b's principal and its actions
        job = service.running_retrain() or next(j for j in reversed(service.jobs.values()) if j.kind == "retrain")
        held = job.result["models"]["*"]["held"]
        assert [(h["tenant"], h["principal"], h["steps"]) for h in held] == [("b", "intruder", 300)]
        assert p_fail(url, keys["agent-1"]) == before


def test_without_the_guard_a_pooled_model_takes_the_fabrications(tmp_path):
    """What the guard is for: on a pooled server started with --no-poison-guard, tenant b's 300 fabricated
    failures move tenant a's costs (with the guard, above, they do not)."""
    db = str(tmp_path / "t.db")
    keys = keys_of(db, {"agent-1": "a", "agent-2": "a", "intruder": "b"})
    with serve_in_thread(config(traces=db, pool_learning=True, poison_guard=False)) as (url, _):
        honest(url, keys)
        retrain(url, keys["agent-1"])
        before = p_fail(url, keys["agent-1"])
        post(url, keys["intruder"], "f" * 300, "forged")
        assert retrain(url, keys["agent-1"])["held"] == []
        assert before < 0.04 and p_fail(url, keys["agent-1"]) > 0.8
