"""Two `portfolio serve` processes on one trace store, as a fleet behind a load balancer runs them: a run planned
on one replica is replanned on either, after steps posted to the other; a retrain requested on one is served by
both; a key added or revoked with `portfolio keys` on the store is honoured by both, each tenant seeing its own
steps. Real servers (`start_cli_server`), real HTTP, one store: an SQLite file, then a PostgreSQL database."""

from __future__ import annotations

import httpx
import pytest
from support import BACKENDS, portfolio, wait_until
from test_service_helpers import start_cli_server
from test_service_runs import TRIP_BODY, TRIP_PLAN, TRIP_TASK, recorded, state_after, valid_from

from benchmarks.bench_service import terminate
from portfolio.planner import REUSE_DELEGATE


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def add_key(db: str, name: str, tenant: str, scopes: str = "plan,steps:write,read,learn") -> str:
    added = portfolio("keys", "add", name, "--tenant", tenant, "--scopes", scopes, "--traces", db)
    assert added.returncode == 0, added.stderr
    return added.stdout.strip()


@pytest.fixture(scope="module", params=BACKENDS)
def fleet(request, tmp_path_factory):
    """(store target, acme's key, [replica A's URL, replica B's URL]): two servers on one store, keys required;
    once on each backend."""
    if request.param == "sqlite":
        db = str(tmp_path_factory.mktemp("fleet") / "t.db")
    else:
        db = request.getfixturevalue("postgres_cluster").database("fleet")
    key = add_key(db, "acme-agent", "acme")
    servers = [
        start_cli_server("--workers", "1", "--delegates", "fast-downward", "--traces", db, insecure=False)
        for _ in range(2)
    ]
    try:
        yield db, key, [url for _, url in servers]
    finally:
        for process, _ in servers:
            terminate(process)


def test_a_run_planned_on_one_replica_is_replanned_on_it_after_steps_posted_to_the_other(fleet):
    _, key, (a, b) = fleet
    first = httpx.post(a + "/v1/plan", json=TRIP_BODY | {"run_id": "trip"}, headers=bearer(key), timeout=60)
    assert first.status_code == 200, first.text
    assert first.json()["plan"] == TRIP_PLAN and valid_from(TRIP_TASK, TRIP_PLAN, state_after(TRIP_TASK, []))
    steps = recorded("trip", TRIP_PLAN[:3], ["success"] * 3)
    posted = httpx.post(b + "/v1/steps", json={"steps": steps}, headers=bearer(key), timeout=60)
    assert posted.status_code == 200 and posted.json()["recorded"] == 3, posted.text
    state = state_after(TRIP_TASK, TRIP_PLAN[:3])
    assert valid_from(TRIP_TASK, TRIP_PLAN, state)  # the whole plan is valid again: only the steps say what ran
    for replica in (a, b, a):  # the planning replica, the other one, and back: each sees the other's plan
        again = httpx.post(replica + "/v1/replan", json={"run_id": "trip", "state": state}, headers=bearer(key))
        assert again.status_code == 200, again.text
        assert again.json()["plan"] == ["(charge-card)"], again.json()["attempts"]
        assert again.json()["delegate"] == REUSE_DELEGATE and valid_from(TRIP_TASK, again.json()["plan"], state)


def test_a_retrain_on_one_replica_is_served_by_both_within_seconds(fleet):
    _, key, (a, b) = fleet
    steps = [
        {"run_id": "flaky", "step": i, "action": "book-flight", "outcome": "failure" if i % 2 else "success"}
        for i in range(30)
    ]
    assert httpx.post(a + "/v1/steps", json={"steps": steps}, headers=bearer(key)).status_code == 200
    job = httpx.post(b + "/v1/retrain", json={}, headers=bearer(key))
    assert job.status_code == 202, job.text
    done = wait_until(
        lambda: (
            (answer := httpx.get(b + job.headers["location"], headers=bearer(key)).json())["status"] != "running"
            and answer
        ),
        timeout=120,
        what="the retrain job",
    )
    assert done["status"] == "done", done
    version = done["result"]["version"]
    assert version is not None

    def costs(replica: str) -> dict:
        answer = httpx.post(replica + "/v1/costs", json=TRIP_BODY, headers=bearer(key), timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()

    for replica in (a, b):  # the other replica's workers load the model within its watch loop's second
        wait_until(lambda: costs(replica)["model_version"] == version, timeout=10, what="the new model on " + replica)
    flight = {row["action"]: row for row in costs(a)["costs"]}["(book-flight)"]
    assert flight["p_fail"] > 0.2  # learned from the 15 failures in 30, not the prior


def test_keys_added_and_revoked_on_the_store_are_honoured_by_both_replicas(fleet):
    db, acme, (a, b) = fleet
    later = add_key(db, "globex-agent", "globex")  # while both run
    for replica in (a, b):
        wait_until(
            lambda: httpx.get(replica + "/v1/actions", headers=bearer(later)).status_code == 200,
            timeout=10,
            what="the new key on " + replica,
        )
    step = [{"run_id": "own", "step": 0, "action": "audit", "outcome": "success"}]
    assert httpx.post(a + "/v1/steps", json={"steps": step}, headers=bearer(later)).status_code == 200
    # each tenant sees its own steps on either replica: globex's audit, not acme's flights, and the reverse
    globex = {row["action"] for row in httpx.get(b + "/v1/actions", headers=bearer(later)).json()["actions"]}
    acme_sees = {row["action"] for row in httpx.get(a + "/v1/actions", headers=bearer(acme)).json()["actions"]}
    assert "audit" in globex and "book-flight" not in globex and "audit" not in acme_sees

    assert portfolio("keys", "revoke", "globex-agent", "--traces", db).returncode == 0
    for replica in (a, b):
        wait_until(
            lambda: httpx.get(replica + "/v1/actions", headers=bearer(later)).status_code == 401,
            timeout=10,
            what="the revoked key refused on " + replica,
        )
    assert httpx.get(b + "/v1/actions", headers=bearer(acme)).status_code == 200
