"""Who may do what, on a real server with API keys of two tenants:

- a matrix generated from the OpenAPI document: for every operation and every scope, a key holding only that
  scope gets 403 unless it is the scope the document names for the operation (or admin); no key gets 401;
- the same for every MCP tool over /mcp;
- tenant B using tenant A's run ids and job ids gets 404 and changes nothing of A's in the store; what B records
  under those ids lands in B's own runs, with B's key as its provenance; /v1/actions shows each tenant its own;
- retrains coalesce over MCP as over HTTP (eight calls at once: one retrain).
"""

from __future__ import annotations

import concurrent.futures

import anyio
import httpx
import pytest
from support import BACKENDS
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, long_plan, serve_in_thread, small_plan, wait_for

SCOPES = ("plan", "steps:write", "learn", "read", "metrics", "admin")
TOOL_SCOPES = {
    "plan": "plan",
    "replan": "plan",
    "validate": "plan",
    "record_steps": "steps:write",
    "action_stats": "read",
    "costs": "read",
    "retrain": "learn",
}


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module", params=BACKENDS)
def served(tmp_path_factory, request):
    """A server with a key per scope (tenant `solo`) and two tenants' keys (`a` and `b`), on each backend."""
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    if request.param == "sqlite":
        db = str(tmp_path_factory.mktemp("tenants") / "t.db")
    else:
        db = request.getfixturevalue("postgres_cluster").database()
    with TraceStore(db) as store:
        keys = {scope: add_key(store, "only-" + scope.replace(":", "-"), "solo", [scope]) for scope in SCOPES}
        keys["a"] = add_key(store, "agent-a", "a", "plan,steps:write,read,learn")
        keys["b"] = add_key(store, "agent-b", "b", "plan,steps:write,read,learn")
    with serve_in_thread(config(traces=db)) as (url, service):
        yield url, service, keys


def operations(document: dict):
    """(method, path, the scopes the document names) for every operation that needs a key."""
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if operation.get("security"):
                yield method.upper(), path, operation["security"][0]["bearer"]


def test_every_operation_documents_its_scope_and_its_refusals(served):
    url, _, keys = served
    document = httpx.get(url + "/openapi.json", headers=bearer(keys["read"]), timeout=30).json()
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["bearer"]["description"],
    }
    found = {(m, p): s for m, p, s in operations(document)}
    assert found == {
        ("POST", "/v1/plan"): ["plan"],
        ("POST", "/v1/replan"): ["plan"],
        ("POST", "/v1/validate"): ["plan"],
        ("POST", "/v1/steps"): ["steps:write"],
        ("POST", "/v1/costs"): ["read"],
        ("GET", "/v1/actions"): ["read"],
        ("POST", "/v1/retrain"): ["learn"],
        ("GET", "/v1/jobs/{job_id}"): ["read"],
        ("GET", "/metrics"): ["metrics"],
    }
    for method, path, _ in operations(document):
        responses = document["paths"][path][method.lower()]["responses"]
        assert {"401", "403", "429"} <= set(responses), (method, path)
    assert "security" not in document["paths"]["/v1/health"]["get"]


def test_the_scope_matrix_of_every_operation(served):
    """Every operation × every scope (9 × 6 = 54 calls with a key, 9 without): a key lacking the operation's
    scope is 403, one holding it (or admin) is let through to the operation (which may then find the empty
    body wanting: 400, or an unknown job: 404), no key is 401."""
    url, _, keys = served
    document = httpx.get(url + "/openapi.json", headers=bearer(keys["read"]), timeout=30).json()
    cells = []
    for method, path, needed in operations(document):
        target = url + path.replace("{job_id}", "no-such-job")
        body = {"json": {}} if method == "POST" else {}
        for scope in SCOPES:
            answer = httpx.request(method, target, headers=bearer(keys[scope]), timeout=60, **body)
            allowed = scope in needed or scope == "admin"
            cells.append((method, path, scope, answer.status_code))
            if allowed:
                assert answer.status_code not in (401, 403), (method, path, scope, answer.text)
            else:
                assert answer.status_code == 403 and answer.json()["kind"] == "Forbidden", (method, path, scope)
                assert repr(needed[0]) in answer.json()["error"]
        anonymous = httpx.request(method, target, timeout=60, **body)
        assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer", (method, path)
    assert len(cells) == 9 * len(SCOPES)


def mcp_session(url: str, key: str | None):
    """An async context manager yielding an initialized MCP client session under `key`."""
    import contextlib

    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    @contextlib.asynccontextmanager
    async def session():
        async with create_mcp_http_client(headers=bearer(key) if key else None) as http:
            async with streamable_http_client(url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as opened:
                    await opened.initialize()
                    yield opened

    return session()


def test_the_scope_matrix_of_every_mcp_tool(served):
    """Every tool × every scope (7 × 6 = 42 calls): the tool's HTTP twin's scope or admin gets past the check
    (to an answer or another error), any other is refused naming the scope."""
    url, _, keys = served
    results = {}
    arguments = {  # valid, so that the call reaches the scope check (the SDK checks the arguments first)
        "replan": {"run_id": "x", "state": []},
        "validate": {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "plan": []},
        "record_steps": {"steps": []},
    }

    async def main() -> None:
        for scope in SCOPES:
            async with mcp_session(url, keys[scope]) as session:
                listed = {tool.name for tool in (await session.list_tools()).tools}
                assert listed == set(TOOL_SCOPES)
                for tool in TOOL_SCOPES:
                    result = await session.call_tool(tool, arguments.get(tool, {}))
                    results[tool, scope] = result.content[0].text if result.is_error else ""

    anyio.run(main)
    assert len(results) == 7 * len(SCOPES)
    for (tool, scope), error in results.items():
        allowed = TOOL_SCOPES[tool] == scope or scope == "admin"
        assert ("Forbidden:" in error) != allowed, (tool, scope, error)
        if not allowed:
            assert repr(TOOL_SCOPES[tool]) in error


def steps_of(service, run_id: str) -> list[tuple]:
    sql = "SELECT step, action, outcome, args FROM steps WHERE run_id = ? ORDER BY step"
    return [tuple(row) for row in service.store.db.execute(sql, [run_id]).fetchall()]


def test_another_tenants_runs_and_jobs_are_404_and_left_alone(served):
    from traces.provenance import provenance

    url, service, keys = served
    a, b = bearer(keys["a"]), bearer(keys["b"])
    planned = httpx.post(url + "/v1/plan", json={**small_plan(), "run_id": "shared-r1"}, headers=a, timeout=60)
    assert planned.status_code == 200 and planned.json()["run_id"] == "shared-r1"  # the client's id, unprefixed
    plan = planned.json()["plan"]
    recorded = [{"run_id": "shared-r1", "step": i, "action": s, "outcome": "success"} for i, s in enumerate(plan)]
    assert httpx.post(url + "/v1/steps", json={"steps": recorded}, headers=a, timeout=30).json()["recorded"] == len(
        plan
    )
    job = httpx.post(url + "/v1/plan", json={**small_plan(), "wait": False}, headers=a, timeout=60).json()
    before = steps_of(service, "@a/shared-r1")
    assert len(before) == len(plan)

    # B names A's run: a 404 that says no more than about a run that never existed
    state = {"run_id": "shared-r1", "state": ["(clear a)", "(ontable a)", "(handempty)"]}
    for wait in (True, False):
        answer = httpx.post(url + "/v1/replan", json={**state, "wait": wait}, headers=b, timeout=60)
        assert answer.status_code == 404 and answer.json()["kind"] == "NotFound", answer.text
        assert "'shared-r1'" in answer.json()["error"] and "@" not in answer.json()["error"]
    never = httpx.post(url + "/v1/replan", json={**state, "run_id": "never-was"}, headers=b, timeout=60).json()
    assert never["error"].replace("never-was", "shared-r1") == answer.json()["error"]  # no existence oracle
    assert httpx.get(url + f"/v1/jobs/{job['id']}", headers=b, timeout=30).status_code == 404
    wait_for(lambda: httpx.get(url + f"/v1/jobs/{job['id']}", headers=a, timeout=30).json()["status"] != "running")
    assert httpx.get(url + f"/v1/jobs/{job['id']}", headers=a, timeout=30).json()["result"]["run_id"]

    # B records steps with A's step numbers first: they are B's own run's, and A's are untouched
    forged = [{"run_id": "shared-r1", "step": i, "action": "(pick-up zz)", "outcome": "failure"} for i in range(40)]
    answer = httpx.post(url + "/v1/steps", json={"steps": forged}, headers=b, timeout=30).json()
    assert answer == {"recorded": 40, "skipped": 0, "conflicts": []}
    assert steps_of(service, "@a/shared-r1") == before
    assert len(steps_of(service, "@b/shared-r1")) == 40
    # A can go on recording its run: B did not take its step numbers
    more = {"run_id": "shared-r1", "step": len(plan), "action": "(pick-up a)", "outcome": "success"}
    assert httpx.post(url + "/v1/steps", json={"steps": [more]}, headers=a, timeout=30).json()["recorded"] == 1
    assert {p[2] for p in provenance(service.store, "@a/shared-r1")} == {"agent-a"}
    assert {(p[1], p[2]) for p in provenance(service.store, "@b/shared-r1")} == {("b", "agent-b")}

    # each tenant's statistics are its own
    a_rows = {r["action"]: r for r in httpx.get(url + "/v1/actions", headers=a, timeout=30).json()["actions"]}
    b_rows = {r["action"]: r for r in httpx.get(url + "/v1/actions", headers=b, timeout=30).json()["actions"]}
    assert {(name, r["steps"], r["failures"]) for name, r in b_rows.items()} == {("pick-up", 40, 40)}
    assert sum(r["steps"] for r in a_rows.values()) == len(plan) + 1 and a_rows["pick-up"]["failures"] == 0


def test_the_default_tenant_cannot_reach_into_a_tenants_namespace(served):
    from traces.store import TraceStore

    url, service, keys = served
    with TraceStore(service.config.traces) as store:
        from portfolio.serve.keys import add_key

        default = add_key(store, "default-agent", "default", "plan,steps:write")
    answer = httpx.post(url + "/v1/replan", json={"run_id": "@a/shared-r1", "state": []}, headers=bearer(default))
    assert answer.status_code == 400 and "reserved" in answer.json()["error"]
    step = {"run_id": "@a/x", "step": 0, "action": "(pick-up a)", "outcome": "failure"}
    assert httpx.post(url + "/v1/steps", json={"steps": [step]}, headers=bearer(default)).status_code == 400
    assert steps_of(service, "@a/x") == []


def test_a_run_id_too_long_for_the_tenants_namespace_is_refused_with_the_limit(served):
    url, service, keys = served
    longest = "r" * (256 - len("@a/"))
    ok = httpx.post(url + "/v1/plan", json={**small_plan(), "run_id": longest}, headers=bearer(keys["a"]), timeout=60)
    assert ok.status_code == 200 and ok.json()["run_id"] == longest
    over = httpx.post(url + "/v1/plan", json={**small_plan(), "run_id": longest + "r"}, headers=bearer(keys["a"]))
    assert over.status_code == 400 and "run ids of tenant 'a' are 1 to 253 characters" in over.json()["error"]


def test_mcp_calls_are_the_callers_tenants_too(served):
    url, service, keys = served

    async def main():
        async with mcp_session(url, keys["a"]) as session:
            planned = await session.call_tool("plan", {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "run_id": "m1"})
            assert not planned.is_error and planned.structured_content["run_id"] == "m1"
        async with mcp_session(url, keys["b"]) as session:
            stolen = await session.call_tool("replan", {"run_id": "m1", "state": ["(handempty)"]})
            stats = await session.call_tool("action_stats", {})
            return stolen, stats

    stolen, stats = anyio.run(main)
    assert stolen.is_error and "NotFound:" in stolen.content[0].text and "'m1'" in stolen.content[0].text
    assert "@" not in stolen.content[0].text
    assert {row["action"] for row in stats.structured_content["actions"]} <= {"pick-up"}  # B's own, no more
    assert service.memory.task("@a/m1") is not None


def test_eight_concurrent_mcp_retrains_are_one_retrain(tmp_path):
    """Before, each MCP `retrain` call ran a retrain of its own (eight calls: eight models); HTTP already
    answered the running one. The one worker is kept busy by a long plan, so that all eight calls arrive while
    the first retrain waits for it. The one retrain fits each of the two tenants' models once, and each call
    answers its own tenant's."""
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        keys = [add_key(store, f"learner-{i}", f"t{i % 2}", "learn,steps:write,plan") for i in range(8)]
    with serve_in_thread(config(traces=db, workers=1)) as (url, service):
        steps = [{"run_id": "r", "step": i, "action": "(pick-up a)", "outcome": "success"} for i in range(20)]
        for key in keys[:2]:  # one of each tenant
            httpx.post(url + "/v1/steps", json={"steps": steps}, headers=bearer(key), timeout=30)
        models = service.store.db.execute("SELECT count(*) FROM models").fetchone()[0]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            busy = pool.submit(httpx.post, url + "/v1/plan", json=long_plan(3.0), headers=bearer(keys[0]), timeout=60)
            wait_for(lambda: service.pool.busy == 1, what="the worker to be busy")

            async def main():
                async def one(key: str, results: list) -> None:
                    async with mcp_session(url, key) as session:
                        results.append(await session.call_tool("retrain", {}))

                results: list = []
                async with anyio.create_task_group() as group:
                    for key in keys:
                        group.start_soon(one, key, results)
                return results

            results = anyio.run(main)
            busy.result()
        assert all(not r.is_error for r in results), [r.content for r in results if r.is_error]
        versions = {r.structured_content["tenant"]: set() for r in results}
        for r in results:
            versions[r.structured_content["tenant"]].add(r.structured_content["version"])
        assert sorted(versions) == ["t0", "t1"] and all(len(v) == 1 for v in versions.values())
        assert versions["t0"] != versions["t1"]
        assert service.store.db.execute("SELECT count(*) FROM models").fetchone()[0] == models + 2


def test_fabricated_failures_of_one_tenant_leave_anothers_costs_alone(served):
    url, _, keys = served
    a, b = bearer(keys["a"]), bearer(keys["b"])
    task = {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4}
    honest = [{"run_id": f"h{i}", "step": 0, "action": "(pick-up b)", "outcome": "success"} for i in range(30)]
    httpx.post(url + "/v1/steps", json={"steps": honest}, headers=a, timeout=30)

    def retrain(headers) -> None:
        job = httpx.post(url + "/v1/retrain", json={}, headers=headers, timeout=30).json()
        wait_for(lambda: httpx.get(url + f"/v1/jobs/{job['id']}", headers=headers).json()["status"] != "running")

    def p_fail() -> float:
        rows = httpx.post(url + "/v1/costs", json=task, headers=a, timeout=60).json()["costs"]
        return next(row["p_fail"] for row in rows if row["action"] == "(pick-up b)")

    retrain(a)
    before = p_fail()
    forged = [{"run_id": f"f{i}", "step": 0, "action": "(pick-up b)", "outcome": "failure"} for i in range(300)]
    httpx.post(url + "/v1/steps", json={"steps": forged}, headers=b, timeout=30)
    retrain(b)
    assert p_fail() == before


@pytest.mark.parametrize("tenant", ["a", "default"])
def test_a_run_id_with_a_nul_character_is_refused_not_a_500_on_the_retry(served, tenant):
    """The store looks recorded steps up by (run_id, step) through SQLite's JSON functions, which end a string
    at NUL: the same step posted again was not found, inserted again and refused by the unique index (500)."""
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    url, service, keys = served
    with TraceStore(service.config.traces) as store:
        key = add_key(store, f"nul-{tenant}", tenant, "steps:write,plan")
    step = {"run_id": "a\u0000b", "step": 1, "action": "(pick-up a)", "outcome": "success"}
    for _ in range(2):
        answer = httpx.post(url + "/v1/steps", json={"steps": [step]}, headers=bearer(key), timeout=30)
        assert answer.status_code == 400 and "NUL" in answer.json()["error"], answer.text
    planned = httpx.post(url + "/v1/plan", json={**small_plan(), "run_id": "x\u0000"}, headers=bearer(key))
    assert planned.status_code == 400 and "NUL" in planned.json()["error"]


def test_two_tenants_using_one_idempotency_key_each_record_their_own_batch(served):
    """Idempotency keys live in the tenant's namespace: B's batch under the key A used is B's first batch, not a
    422 (nor A's answer replayed); A's retry under it is still A's replay. Over HTTP's header and the body."""
    url, service, keys = served
    a, b = bearer(keys["a"]), bearer(keys["b"])
    batch = {"steps": [{"run_id": "idem-1", "step": 0, "action": "(pick-up a)", "outcome": "success"}]}
    first = httpx.post(url + "/v1/steps", json=batch, headers={**a, "Idempotency-Key": "k-1"}, timeout=30)
    assert first.json() == {"recorded": 1, "skipped": 0, "conflicts": []}
    other = {"steps": [{"run_id": "idem-2", "step": 0, "action": "(pick-up b)", "outcome": "failure"}]}
    theirs = httpx.post(url + "/v1/steps", json=other, headers={**b, "Idempotency-Key": "k-1"}, timeout=30)
    assert theirs.status_code == 200 and theirs.json() == {"recorded": 1, "skipped": 0, "conflicts": []}
    assert len(steps_of(service, "@b/idem-2")) == 1
    again = httpx.post(url + "/v1/steps", json={**batch, "idempotency_key": "k-1"}, headers=a, timeout=30)
    assert again.json() == first.json() and len(steps_of(service, "@a/idem-1")) == 1
    reused = httpx.post(url + "/v1/steps", json={**other, "idempotency_key": "k-1"}, headers=a, timeout=30)
    assert reused.status_code == 422 and reused.json()["kind"] == "IdempotencyKeyReused"
    assert steps_of(service, "@a/idem-2") == []


def test_the_default_tenant_cannot_use_an_idempotency_key_of_a_tenants_namespace(served):
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    url, service, _ = served
    with TraceStore(service.config.traces) as store:
        default = add_key(store, "default-idem", "default", "steps:write")
    batch = {"steps": [{"run_id": "idem-3", "step": 0, "action": "(pick-up a)", "outcome": "success"}]}
    answer = httpx.post(url + "/v1/steps", json=batch, headers={**bearer(default), "Idempotency-Key": "@a/k-1"})
    assert answer.status_code == 400 and "reserved" in answer.json()["error"]
    assert steps_of(service, "idem-3") == []


def test_a_workers_models_are_one_per_tenant_and_loaded_again_only_when_its_own_moves(tmp_path):
    """`TenantModels`, as each worker and the server keep them: a tenant's model is parsed once, and again only
    when a retrain stored a newer one of that tenant, not when another tenant's was retrained; the tenants used
    last are kept, up to `size`."""
    from learning.retrain import retrain
    from portfolio.serve.tenant_models import TenantModels
    from traces.records import StepRecord
    from traces.store import TraceStore

    with TraceStore(tmp_path / "t.db") as store:

        def record_and_fit(tenant: str) -> int:
            runs = [f"@{tenant}/{i}-{store.last_step_id()}" for i in range(5)]
            store.record_steps(StepRecord(run_id=r, step=0, action="go", outcome="success") for r in runs)
            return retrain(store, tenant=tenant).version

        for tenant in ("t0", "t1", "t2"):
            record_and_fit(tenant)
        models = TenantModels(store, size=2)
        generation = store.latest_model_version()
        version, model = models.get("t0", generation)
        assert version == store.latest_model_version("t0") and model is not None
        assert models.get("t0", generation)[1] is model
        generation = record_and_fit("t1")  # another tenant's retrain: t0's model stands
        assert models.get("t0", generation) == (version, model)
        generation = record_and_fit("t0")
        newer, reloaded = models.get("t0", generation)
        assert newer == generation and reloaded is not model
        models.get("t1", generation)
        models.get("t2", generation)
        assert len(models) == 2
        assert models.get("nobody", generation) == (None, None)


def test_each_tenants_plans_are_made_under_its_own_model(served):
    """One worker plans for tenant a, b, a tenant without a model and a again: each plan's costs come from its
    tenant's model (the version in its `cost_model`), the one without plans on the task's own costs."""
    url, _, keys = served
    for tenant in ("a", "b"):
        steps = [{"run_id": f"own-{i}", "step": 0, "action": "(pick-up c)", "outcome": "success"} for i in range(5)]
        httpx.post(url + "/v1/steps", json={"steps": steps}, headers=bearer(keys[tenant]), timeout=30)
    job = httpx.post(url + "/v1/retrain", json={}, headers=bearer(keys["a"]), timeout=30).json()
    wait_for(lambda: httpx.get(url + f"/v1/jobs/{job['id']}", headers=bearer(keys["a"])).json()["status"] != "running")
    versions = {tenant: served[1].store.latest_model_version(tenant) for tenant in ("a", "b")}
    assert versions["a"] != versions["b"]

    def cost_model(key: str) -> str:
        answer = httpx.post(url + "/v1/plan", json=small_plan(), headers=bearer(key), timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()["cost_model"]

    assert cost_model(keys["a"]).startswith(f"learned:{versions['a']}:")
    assert cost_model(keys["b"]).startswith(f"learned:{versions['b']}:")
    assert cost_model(keys["plan"]) == "task"  # tenant solo has recorded nothing
    assert cost_model(keys["a"]).startswith(f"learned:{versions['a']}:")
