"""A trace store out of the server's reach: its SQLite file moved away, or another file put in its place, under a
running server (which still holds the old file open, so its writes would land where no other server looks).
`/v1/health` says `degraded` and why, every request that needs the store is a 503 `StoreUnreachableError` with
Retry-After (no step acknowledged into the lost file), a plan without a run id is still answered, and once the
file is back the server serves again on its own, without a restart. What a PostgreSQL store that cannot be
reached looks like is its backend's error, met by the same probe (`portfolio.serve.store_health`)."""

from __future__ import annotations

import os
import sqlite3

import httpx
from test_service_helpers import config, serve_in_thread, small_plan, wait_for

from traces import TraceStore


def steps(run: str, n: int) -> dict:
    return {"steps": [{"run_id": run, "step": i, "action": "pick-up", "outcome": "success"} for i in range(n)]}


def reasons(client: httpx.Client) -> list[str]:
    health = client.get("/v1/health").json()
    return health["reasons"] if health["status"] == "degraded" else []


def refused_while_away(client: httpx.Client, what: str) -> None:
    wait_for(lambda: any(what in reason for reason in reasons(client)), 10, "degraded health")
    assert "503" in " ".join(reasons(client)) and "traces.db" not in " ".join(reasons(client))
    for answer in (
        client.post("/v1/steps", json=steps("away", 3)),
        client.post("/v1/replan", json={"run_id": "kept", "state": []}),
        client.post("/v1/plan", json=small_plan() | {"run_id": "new-run"}),
        client.get("/v1/actions"),
        client.post("/v1/retrain"),
    ):
        assert answer.status_code == 503, answer.text
        assert answer.json()["kind"] == "StoreUnreachableError" and answer.headers["retry-after"] == "1"
        assert "traces.db" not in answer.text and "cannot be reached" in answer.json()["error"]
    assert client.post("/v1/plan", json=small_plan()).status_code == 200  # planning needs no store


def back_to_ok(client: httpx.Client) -> None:
    wait_for(lambda: client.get("/v1/health").json()["status"] == "ok", 10, "health back to ok")
    assert client.post("/v1/steps", json=steps("back", 2)).json()["recorded"] == 2


def test_a_store_moved_away_and_back_is_refused_then_served_again(tmp_path):
    path = tmp_path / "store" / "traces.db"
    path.parent.mkdir()
    with serve_in_thread(config(traces=str(path))) as (url, _), httpx.Client(base_url=url, timeout=60) as client:
        assert client.post("/v1/plan", json=small_plan() | {"run_id": "kept"}).status_code == 200
        assert client.post("/v1/steps", json=steps("before", 2)).json()["recorded"] == 2
        wait_for(lambda: client.get("/v1/health").json()["status"] == "ok", 10, "health ok")
        os.rename(path, tmp_path / "store" / "moved.db")
        refused_while_away(client, "no longer where the server opened it")
        os.rename(tmp_path / "store" / "moved.db", path)
        back_to_ok(client)
    with TraceStore(path) as store:  # what was acknowledged is in the file, and nothing else
        assert {r.run_id for r in store.iter_steps()} == {"before", "back"}


def test_another_file_in_the_stores_place_is_refused_until_the_first_is_back(tmp_path):
    path = tmp_path / "store" / "traces.db"
    path.parent.mkdir()
    with serve_in_thread(config(traces=str(path))) as (url, _), httpx.Client(base_url=url, timeout=60) as client:
        assert client.post("/v1/plan", json=small_plan() | {"run_id": "kept"}).status_code == 200
        wait_for(lambda: client.get("/v1/health").json()["status"] == "ok", 10, "health ok")
        os.rename(path, tmp_path / "store" / "original.db")
        sqlite3.connect(path).close()  # another (empty) database under its name
        refused_while_away(client, "another file took its place")
        os.replace(tmp_path / "store" / "original.db", path)
        back_to_ok(client)


def test_a_path_that_cannot_be_followed_is_unreachable_and_a_store_that_is_no_file_is_not_checked(tmp_path):
    from portfolio.serve.store_health import StoreHealth

    path = tmp_path / "store" / "traces.db"
    path.parent.mkdir()
    with TraceStore(path) as store:
        health = StoreHealth()
        health.opened(str(path))
        health.probe(store)
        assert health.unreachable() is None and health.reasons() == []
        os.rename(path.parent, tmp_path / "elsewhere")
        path.parent.write_text("a file where the directory was")
        health.probe(store)
        assert "the path to its file cannot be followed" in (health.unreachable() or "")
        path.parent.unlink()
        os.rename(tmp_path / "elsewhere", path.parent)
        health.probe(store)
        assert health.unreachable() is None and health.reasons() == []
    url = StoreHealth()
    url.opened("postgresql://fleet@db/traces")  # no file to follow: nothing noted, nothing to find missing
    assert url._identity is None
