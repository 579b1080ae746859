"""A trace store out of the server's reach: its SQLite file moved away, or another file put in its place, under a
running server (which still holds the old file open, so its writes would land where no other server looks).
`/v1/health` says `degraded` and why, every request that needs the store is a 503 `StoreUnreachableError` with
Retry-After (no step acknowledged into the lost file), a plan without a run id is still answered, and once the
file is back the server serves again on its own, without a restart. A PostgreSQL store whose server stops is
the same to a client: degraded health, 503s with Retry-After (never a 500), and served again once the server is
back, the replica not restarted; nothing a client reads names the URL, its server or its password."""

from __future__ import annotations

import os
import sqlite3

import httpx
import pytest
from support import PostgresCluster, postgres_bin
from test_service_helpers import config, serve_in_thread, small_plan, wait_for

from traces import TraceStore


def steps(run: str, n: int) -> dict:
    return {"steps": [{"run_id": run, "step": i, "action": "pick-up", "outcome": "success"} for i in range(n)]}


def reasons(client: httpx.Client) -> list[str]:
    health = client.get("/v1/health").json()
    return health["reasons"] if health["status"] == "degraded" else []


def refused_while_away(client: httpx.Client, what: str, hidden: tuple[str, ...] = ("traces.db",)) -> None:
    wait_for(lambda: any(what in reason for reason in reasons(client)), 10, "degraded health")
    assert "503" in " ".join(reasons(client))
    assert not any(secret in client.get("/v1/health").text for secret in hidden)
    for answer in (
        client.post("/v1/steps", json=steps("away", 3)),
        client.post("/v1/replan", json={"run_id": "kept", "state": []}),
        client.post("/v1/plan", json=small_plan() | {"run_id": "new-run"}),
        client.get("/v1/actions"),
        client.post("/v1/retrain"),
    ):
        assert answer.status_code == 503, answer.text
        assert answer.json()["kind"] == "StoreUnreachableError" and answer.headers["retry-after"] == "1"
        assert not any(secret in answer.text for secret in hidden) and "cannot be reached" in answer.json()["error"]
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


@pytest.fixture
def own_postgres():
    """A PostgreSQL cluster of the test's own, which it may stop and start (the session's, `postgres_cluster`,
    serves the worker's other tests)."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (no pg_ctl on PATH or in /usr/lib/postgresql/*/bin)")
    cluster = PostgresCluster(bin_dir)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_postgresql_server_down_is_refused_then_served_again_without_a_restart(own_postgres):
    url = own_postgres.database_with_password("planner", "s3cret-pw")
    hidden = ("s3cret", url.rsplit("/", 1)[1], f":{own_postgres.port}", f"port {own_postgres.port}")
    with serve_in_thread(config(traces=url)) as (base, _), httpx.Client(base_url=base, timeout=60) as client:
        assert client.post("/v1/plan", json=small_plan() | {"run_id": "kept"}).status_code == 200
        assert client.post("/v1/steps", json=steps("before", 2)).json()["recorded"] == 2
        wait_for(lambda: client.get("/v1/health").json()["status"] == "ok", 10, "health ok")
        own_postgres.stop_server()
        try:
            refused_while_away(client, "its PostgreSQL server does not answer", hidden)
        finally:
            own_postgres.start()
        back_to_ok(client)
        again = client.post("/v1/replan", json={"run_id": "kept", "state": []})  # the run planned before
        assert again.status_code == 200, again.text
    with TraceStore(url) as store:
        assert {r.run_id for r in store.iter_steps()} == {"before", "back"}


def test_the_probe_finds_a_server_gone_and_back_and_a_request_that_met_it_refuses_the_next(own_postgres):
    """The probe's own retry reconnects (no replica restart); a request that gave up on the server before any
    probe looked marks the store out of reach at once, so the next requests are refused without their retries."""
    from portfolio.serve.store_health import StoreHealth

    url = own_postgres.database()
    with TraceStore(url, retries=1, backoff_s=0.01) as store:
        health = StoreHealth()
        health.probe(store)
        assert health.reasons() == []
        own_postgres.stop_server()
        try:
            health.probe(store)
            assert "PostgreSQL server does not answer" in (health.unreachable() or "")
        finally:
            own_postgres.start()
        health.probe(store)  # the store's connection opened again by the probe itself
        assert health.unreachable() is None and health.reasons() == []
        own_postgres.stop_server()
        try:
            health.failed(_store_error(store))  # what a request met, noted before any probe
            assert health.unreachable() is not None
        finally:
            own_postgres.start()


def _store_error(store: TraceStore) -> Exception:
    from traces.errors import StoreUnavailableError

    with pytest.raises(StoreUnavailableError) as caught:
        store.count_steps()
    return caught.value


def test_a_postgresql_url_its_password_and_its_server_are_hidden_from_every_answer():
    from portfolio.serve.store_health import StorePaths

    url = "postgresql://planner:p%40ss@db.internal:5433/traces?sslmode=require"
    paths = StorePaths(url)
    texts = [
        f"{url}: cannot reach the PostgreSQL server",
        "postgresql://planner:***@db.internal:5433/traces?sslmode=require: gave up",
        "postgresql://planner@db.internal:5433/traces?sslmode=require: gave up",
        'connection to server at "db.internal" (10.0.0.5), port 5433 failed: Connection refused',
        'connection to server on socket "/run/postgresql/.s.PGSQL.5433" failed',
        "password p@ss or p%40ss",
    ]
    for text in texts:
        shown = paths.hide(text)
        assert not any(part in shown for part in ("p@ss", "p%40ss", "db.internal", "5433", "10.0.0.5")), shown
    assert paths.hide(texts[0]).startswith("the trace store: cannot reach")
    assert paths.hide(texts[3]) == "connection to the trace store's server failed: Connection refused"


def test_a_server_gone_met_by_a_request_is_answered_503_with_retry_after_not_500():
    """Before the probe has looked, a request's own retries end in `StoreUnavailableError`: answered 503 with
    Retry-After (a load balancer's cue to try another replica), its message without the URL, password or server."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from portfolio.serve.errors import install_error_handlers
    from portfolio.serve.store_health import StorePaths
    from traces.errors import StoreUnavailableError

    url = "postgresql://planner:s3cret@db.internal:5433/traces"
    app = FastAPI()
    install_error_handlers(app, StorePaths(url).hide)

    @app.get("/gone")
    def gone() -> None:
        raise StoreUnavailableError(
            f'{url}: cannot reach the PostgreSQL server (connection to server at "db.internal" (10.0.0.5), port '
            "5433 failed: Connection refused); gave up after 10 retries, nothing from this operation was written."
        )

    answer = TestClient(app).get("/gone")
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert answer.json()["kind"] == "StoreUnavailableError" and "cannot reach" in answer.json()["error"]
    assert not any(part in answer.text for part in ("s3cret", "db.internal", "5433", "10.0.0.5")), answer.text
