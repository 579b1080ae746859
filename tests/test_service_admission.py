"""What the Guard refuses before an operation runs, on a real server: a Host it does not answer for (421, DNS
rebinding), a foreign Origin (403, a web page calling across sites), a body that is not `application/json` (415:
a web page's form or `text/plain` post needs no CORS preflight), and a principal over its quotas (429 with
Retry-After: requests and body bytes per second, plans at once, retrains per minute). Even on an --insecure
server, where a web page could otherwise forge steps or start a retrain."""

from __future__ import annotations

import concurrent.futures

import httpx
import pytest
from test_service_helpers import config, long_plan, raw, serve_in_thread, small_plan, wait_for

STEP = {"run_id": "r", "step": 0, "action": "(pick-up a)", "outcome": "failure"}


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def insecure(tmp_path_factory):
    """An --insecure server (every request is let in as the default tenant's admin) with a trace store."""
    db = tmp_path_factory.mktemp("admission") / "t.db"
    with serve_in_thread(config(traces=str(db)), allowed_hosts=["planner.internal"]) as (url, service):
        yield url, service


def steps_in_store(service) -> int:
    return service.store.db.execute("SELECT count(*) FROM steps").fetchone()[0]


def test_a_host_the_server_does_not_answer_for_is_421_on_every_route(insecure):
    url, service = insecure
    port = url.rsplit(":", 1)[1]
    for method, path in [("GET", "/v1/health"), ("GET", "/v1/actions"), ("POST", "/v1/steps"), ("POST", "/mcp")]:
        body = b'{"steps": []}' if method == "POST" else None
        status, _, answer = raw(
            url, method, path, body, Host=f"rebound.example:{port}", Content_Type="application/json"
        )
        assert status == 421 and b"MisdirectedRequest" in answer, (path, answer)
    assert raw(url, "GET", "/v1/actions")[0] == 400  # no Host at all: refused by the HTTP server itself
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "planner.internal", "PLANNER.internal:1"):
        assert raw(url, "GET", "/v1/actions", Host=host)[0] == 200, host


def test_a_foreign_origin_is_403_and_a_local_one_is_answered(insecure):
    url, service = insecure
    before = steps_in_store(service)
    for origin in (
        "http://evil.example",
        "https://evil.example:8765",
        "null",
        "file://",
        "http://127.0.0.1.evil.example",
    ):
        answer = httpx.post(url + "/v1/steps", json={"steps": [STEP]}, headers={"Origin": origin}, timeout=30)
        assert answer.status_code == 403 and answer.json()["kind"] == "ForbiddenOrigin", origin
        retrain = httpx.post(url + "/v1/retrain", headers={"Origin": origin}, timeout=30)
        assert retrain.status_code == 403, origin
    assert httpx.get(url + "/v1/actions", headers={"Origin": "http://evil.example"}).status_code == 403
    assert steps_in_store(service) == before
    for origin in ("http://127.0.0.1:8000", "http://localhost:3000", "https://planner.internal"):
        assert httpx.get(url + "/v1/actions", headers={"Origin": origin}, timeout=30).status_code == 200, origin


@pytest.mark.parametrize(
    "content_type, body",
    [
        (
            "application/x-www-form-urlencoded",
            b'{"steps": [{"run_id": "r", "step": 0, "action": "a", "outcome": "failure"}]}',
        ),
        ("text/plain", b'{"steps": [{"run_id": "r", "step": 0, "action": "a", "outcome": "failure"}]}'),
        ("multipart/form-data; boundary=x", b"--x\r\n\r\n{}\r\n--x--"),
        (None, b'{"steps": []}'),
    ],
    ids=["form", "text-plain", "multipart", "none"],
)
def test_a_cross_site_form_post_is_415_and_records_nothing(insecure, content_type, body):
    """The three content types a web page may post across sites without a CORS preflight (and none at all)."""
    url, service = insecure
    before = steps_in_store(service)
    headers = {"Content-Type": content_type} if content_type else {}
    for path in ("/v1/steps", "/v1/retrain", "/v1/plan"):
        status, _, answer = raw(url, "POST", path, body, Host="127.0.0.1", **headers)
        assert status == 415 and b"UnsupportedMediaType" in answer and b"application/json" in answer, path
    assert steps_in_store(service) == before
    # JSON with a charset is JSON; an empty body needs no type (`POST /v1/retrain` with nothing)
    ok = raw(
        url, "POST", "/v1/steps", b'{"steps": []}', Host="127.0.0.1", Content_Type="application/json; charset=utf-8"
    )
    assert ok[0] == 200


def test_the_mcp_sdks_rebinding_protection_stays_on_when_listening_on_every_interface():
    """With --host 0.0.0.0 the SDK would switch its own check off; the app gives it the server's allow-list."""
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.requests import Request

    from portfolio.serve.http import create_app
    from portfolio.serve.service import Service

    app = create_app(Service(config()), token="t", host="0.0.0.0", allowed_hosts=["planner.internal"])
    route = next(r for r in app.app.routes if getattr(r, "path", None) == "/mcp")
    settings = route.endpoint.session_manager.security_settings
    assert settings is not None and settings.enable_dns_rebinding_protection
    check = TransportSecurityMiddleware(settings)

    async def verdict(host: str, origin: str | None = None):
        headers = [(b"host", host.encode()), (b"content-type", b"application/json")]
        headers += [(b"origin", origin.encode())] if origin else []
        answer = await check.validate_request(Request({"type": "http", "headers": headers}), is_post=True)
        return None if answer is None else answer.status_code

    import anyio

    assert anyio.run(verdict, "rebound.example:8765") == 421
    assert anyio.run(verdict, "127.0.0.1:8765", "http://evil.example") == 403
    for host in ("localhost:8765", "0.0.0.0:8765", "planner.internal", "[::1]:1"):
        assert anyio.run(verdict, host, f"http://{host}") is None, host


def test_over_the_request_rate_is_429_with_retry_after_and_a_key_may_have_its_own(tmp_path):
    from portfolio.serve.keys import add_key
    from portfolio.serve.quotas import QuotaDefaults
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        slow = add_key(store, "slow", "a", "read")
        fast = add_key(store, "fast", "a", "read", rps=1000)
    with serve_in_thread(config(traces=db), quotas=QuotaDefaults(rps=2)) as (url, _):
        with httpx.Client(base_url=url, timeout=30) as client:
            answers = [client.get("/v1/actions", headers=bearer(slow)) for _ in range(5)]
            refused = [a for a in answers if a.status_code == 429]
            assert refused and all(a.status_code in (200, 429) for a in answers)
            assert refused[0].headers["retry-after"] == "1" and refused[0].json()["kind"] == "QuotaExceeded"
            assert "'slow'" in refused[0].json()["error"]
            assert all(client.get("/v1/actions", headers=bearer(fast)).status_code == 200 for _ in range(20))
            wait_for(lambda: client.get("/v1/actions", headers=bearer(slow)).status_code == 200, what="a refill")


def test_over_the_body_bytes_rate_is_429(tmp_path):
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        key = add_key(store, "bulk", "a", "steps:write", body_mb_per_s=0.01)  # ~10 KB/s
    with serve_in_thread(config(traces=db), max_body_bytes=64 * 1024) as (url, service):
        steps = [{**STEP, "run_id": f"r{i}", "outcome": "success"} for i in range(400)]  # ~30 KB
        first = httpx.post(url + "/v1/steps", json={"steps": steps}, headers=bearer(key), timeout=30)
        second = httpx.post(url + "/v1/steps", json={"steps": steps[:390]}, headers=bearer(key), timeout=30)
        third = httpx.post(url + "/v1/steps", json={"steps": steps[:380]}, headers=bearer(key), timeout=30)
        assert first.status_code == 200 and first.json()["recorded"] == 400
        refused = next(a for a in (second, third) if a.status_code == 429)
        assert int(refused.headers["retry-after"]) >= 1 and "MB of request bodies" in refused.json()["error"]


def test_plans_in_flight_beyond_the_keys_limit_are_429(tmp_path):
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        one = add_key(store, "one-at-a-time", "a", "plan", max_concurrent_plans=1)
        other = add_key(store, "other", "b", "plan")
    with (
        serve_in_thread(config(traces=db, workers=2)) as (url, service),
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        pending = pool.submit(httpx.post, url + "/v1/plan", json=long_plan(2.0), headers=bearer(one), timeout=60)
        wait_for(lambda: service.pool.busy == 1, what="the long plan to start")
        refused = httpx.post(url + "/v1/plan", json=small_plan(), headers=bearer(one), timeout=60)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert "1 plans in flight" in refused.json()["error"]
        job = httpx.post(url + "/v1/plan", json={**small_plan(), "wait": False}, headers=bearer(one), timeout=60)
        assert job.status_code == 429  # a job holds a slot as well
        assert httpx.post(url + "/v1/plan", json=small_plan(), headers=bearer(other), timeout=60).status_code == 200
        assert pending.result().status_code == 200
        assert httpx.post(url + "/v1/plan", json=small_plan(), headers=bearer(one), timeout=60).status_code == 200


def test_retrains_started_beyond_the_rate_are_429(tmp_path):
    from portfolio.serve.keys import add_key
    from portfolio.serve.quotas import QuotaDefaults
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        key = add_key(store, "learner", "a", "learn,steps:write,read")
    with serve_in_thread(config(traces=db), quotas=QuotaDefaults(retrains_per_minute=1)) as (url, _):
        httpx.post(url + "/v1/steps", json={"steps": [STEP]}, headers=bearer(key), timeout=30)
        first = httpx.post(url + "/v1/retrain", headers=bearer(key), timeout=30)
        assert first.status_code == 202
        job = first.json()["id"]
        wait_for(lambda: httpx.get(url + f"/v1/jobs/{job}", headers=bearer(key)).json()["status"] != "running")
        again = httpx.post(url + "/v1/retrain", headers=bearer(key), timeout=30)
        assert again.status_code == 429 and int(again.headers["retry-after"]) > 1
        assert "retrains per minute" in again.json()["error"]
