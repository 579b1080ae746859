"""The trace store on PostgreSQL, beyond what every store test checks on both backends (`store_target`): the URL's
password is never shown, the store outlives a server restart and says clearly when the server is away, another
program's database and a newer schema are refused, and the CLI and `portfolio serve` run on a URL. Against a
throw-away cluster (`postgres_cluster` in conftest.py); skipped, saying why, where PostgreSQL is not installed."""

from __future__ import annotations

import json
import re

import httpx
import psycopg
import pytest
from support import portfolio
from test_service_helpers import start_cli_server
from test_service_runs import TRIP_BODY, TRIP_PLAN, TRIP_TASK, recorded, state_after

from portfolio.planner import REUSE_DELEGATE
from traces import CorruptDatabaseError, SchemaVersionError, StepRecord, TraceStore, TraceStoreError
from traces.connection import open_connections
from traces.errors import StoreUnavailableError
from traces.schema import SCHEMA_VERSION


def with_password(url: str, secret: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{secret}@")


def step(i: int, run: str = "r1", outcome: str = "success") -> StepRecord:
    return StepRecord(run_id=run, step=i, action="drive", args=("t1", "a", "b"), outcome=outcome)


def test_a_password_in_the_url_is_never_shown(postgres_url):
    """The cluster trusts 127.0.0.1, so any password opens it: what matters is where it shows up."""
    url = with_password(postgres_url, "s3cret-w0rd")
    with TraceStore(url) as store:
        assert "s3cret" not in store.path and "s3cret" not in repr(store) and "postgres:***@" in store.path
        assert not any("s3cret" in key for key in open_connections())
        with pytest.raises(TraceStoreError) as caught:
            store.end_run("nope", "success")
        assert "s3cret" not in str(caught.value)
    missing = with_password(postgres_url.rsplit("/", 1)[0] + "/no_such_db", "s3cret-w0rd")
    with pytest.raises(TraceStoreError, match="no such database") as caught:
        TraceStore(missing)
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)


def test_the_store_outlives_a_server_restart_and_says_when_the_server_is_away(postgres_cluster):
    with TraceStore(postgres_cluster.database(), retries=2, backoff_s=0.01) as store:
        store.record_steps([step(0)])
        postgres_cluster.restart()  # every connection cut
        assert store.record_steps([step(1)]).recorded == 1 and store.count_steps() == 2
        postgres_cluster.stop_server()
        try:
            with pytest.raises(StoreUnavailableError, match="cannot reach the PostgreSQL server"):
                store.record_steps([step(2)])
        finally:
            postgres_cluster.start()
        assert store.record_steps([step(2)]).recorded == 1  # back: the next operation connects again
        assert [s.step for s in store.iter_steps()] == [0, 1, 2]


def test_once_an_operation_gave_up_on_the_server_the_next_ones_try_once_until_it_is_back(postgres_cluster):
    """During an outage only the first operation waits out the retries; the ones after it try once each (a
    request answers at once, not after seconds of backoff), and the first that reaches the server again ends that."""
    with TraceStore(postgres_cluster.database(), retries=3, backoff_s=0.01) as store:
        store.record_steps([step(0)])
        reconnects = []
        reconnect = store._reconnect
        store._reconnect = lambda shared: (reconnects.append(1), reconnect(shared))  # type: ignore[method-assign]
        postgres_cluster.stop_server()
        try:
            with pytest.raises(StoreUnavailableError, match="gave up after 3 retries"):
                store.record_steps([step(1)])
            assert len(reconnects) == 3  # one before each retry
            for _ in range(2):
                reconnects.clear()
                with pytest.raises(StoreUnavailableError, match="tried once"):
                    store.count_steps()
                assert len(reconnects) == 1
        finally:
            postgres_cluster.start()
        assert store.count_steps() == 1  # back: tried once, and it answered
        postgres_cluster.restart()  # every connection cut, the server back at once: the full retries again
        assert store.record_steps([step(1)]).recorded == 1


def test_step_ids_increase_in_commit_order_across_threads(postgres_url):
    """Several threads and a second store record at once: the ids, the learner's time axis, follow commit order
    (one write lock), so a reader's last id never has a smaller one appear after it."""
    import threading

    seen: list[int] = []
    with TraceStore(postgres_url) as store, TraceStore(postgres_url) as reader:

        def write(run: str) -> None:
            for start in range(0, 200, 20):
                store.record_steps([step(i, run) for i in range(start, start + 20)])
                seen.append(reader.last_step_id())

        threads = [threading.Thread(target=write, args=(f"w{k}",)) for k in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ids = [row[0] for chunk in store.iter_step_chunks(("id",)) for row in chunk]
        assert len(ids) == 600 and ids == sorted(ids) and len(set(ids)) == 600
        for last in seen:  # every id a reader saw, and all below it, were there when it looked
            assert store.count_steps(through=last) == sum(1 for i in ids if i <= last)


def test_another_programs_database_and_a_newer_schema_are_refused(postgres_cluster):
    foreign = postgres_cluster.database()
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(CorruptDatabaseError, match="PostgreSQL database of something else"):
        TraceStore(foreign)
    newer = postgres_cluster.database()
    TraceStore(newer).close()
    with psycopg.connect(newer, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = %s", [SCHEMA_VERSION + 1])
    with pytest.raises(SchemaVersionError, match="newer release"):
        TraceStore(newer)


LINES = [
    {"run_id": f"r{run}", "step": i, "action": "deliver", "args": ["p1", "b"],
     "outcome": "failure" if (i + run) % 3 == 0 else "success", "duration_ms": 10.0}
    for run in range(6) for i in range(4)
]  # fmt: skip

DOMAIN = """(define (domain d) (:requirements :strips)
  (:predicates (at ?p) (done))
  (:action deliver :parameters (?p) :precondition (at ?p) :effect (done)))"""
PROBLEM = """(define (problem p) (:domain d) (:objects p1 b)
  (:init (at p1) (at b)) (:goal (done)))"""


def test_the_cli_on_a_postgresql_url(postgres_url, tmp_path):
    """import, stats, retrain, costs and plan --traces with a URL; backup says what to use instead; a password in
    the URL is not echoed."""
    url = with_password(postgres_url, "hunter22")
    steps = tmp_path / "steps.jsonl"
    steps.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    imported = portfolio("traces", "import", steps, "--traces", url)
    assert imported.returncode == 0 and "imported 24 step(s)" in imported.stdout, imported.stderr
    assert "hunter22" not in imported.stdout + imported.stderr and "postgres:***@" in imported.stdout
    stats = portfolio("traces", "stats", "--json", "--traces", url)
    assert stats.returncode == 0 and json.loads(stats.stdout)[0]["steps"] == 24, stats.stderr
    retrained = portfolio("retrain", "--traces", url)
    assert retrained.returncode == 0, retrained.stderr
    (tmp_path / "d.pddl").write_text(DOMAIN)
    (tmp_path / "p.pddl").write_text(PROBLEM)
    costs = portfolio("costs", tmp_path / "d.pddl", tmp_path / "p.pddl", "--traces", url)
    assert costs.returncode == 0 and re.search(r"deliver", costs.stdout), costs.stderr
    plan = portfolio("plan", tmp_path / "d.pddl", tmp_path / "p.pddl", "--traces", url)
    assert plan.returncode == 0 and "deliver" in plan.stdout, plan.stderr
    with TraceStore(postgres_url) as store:
        assert (
            store.latest_model() is not None
            and len(store.plans(store.db.execute("SELECT id FROM runs").fetchone()[0])) == 1
        )
    backup = portfolio("traces", "backup", tmp_path / "copy.db", "--traces", url)
    assert backup.returncode == 2 and "pg_dump" in backup.stderr and "Traceback" not in backup.stderr
    assert "hunter22" not in backup.stderr
    away = portfolio("traces", "stats", "--traces", url.rsplit("/", 1)[0] + "/no_such_db")
    assert away.returncode == 2 and "no such database" in away.stderr and "Traceback" not in away.stderr


def test_serve_on_a_postgresql_url_plans_records_and_replans(postgres_cluster):
    """A role that must give its password: the planner workers record the plans, so the password reached them,
    through their environment, not their arguments; neither the server's log nor any argument shows it."""
    import psutil

    url = postgres_cluster.database_with_password("planner", "pw-7f3a9c")
    refused = portfolio("traces", "stats", "--traces", url.replace("pw-7f3a9c", "wrong"))
    assert refused.returncode == 2 and "password was refused" in refused.stderr and "wrong" not in refused.stderr
    process, base = start_cli_server("--traces", url, "--workers", "1")
    try:
        run = "trip-pg"
        first = httpx.post(base + "/v1/plan", json=TRIP_BODY | {"run_id": run}, timeout=60)
        assert first.status_code == 200 and first.json()["plan"] == TRIP_PLAN, first.text
        posted = httpx.post(base + "/v1/steps", json={"steps": recorded(run, TRIP_PLAN[:3], ["success"] * 3)})
        assert posted.status_code == 200 and posted.json()["recorded"] == 3, posted.text
        state = state_after(TRIP_TASK, TRIP_PLAN[:3])
        again = httpx.post(base + "/v1/replan", json={"run_id": run, "state": state}, timeout=60).json()
        assert again["delegate"] == REUSE_DELEGATE and again["plan"] == ["(charge-card)"], again
        assert httpx.get(base + "/v1/health").json()["status"] == "ok"
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
        workers = [p for p in tree if "portfolio.serve.worker" in " ".join(p.cmdline())]
        assert workers and all("pw-7f3a9c" not in " ".join(p.cmdline()) for p in workers)
    finally:
        process.terminate()
        _, log = process.communicate(timeout=30)
    assert "pw-7f3a9c" not in log
    with TraceStore(url) as store:
        assert store.count_steps() == 3 and store.get_run(run) is not None
        assert len(store.plans(run)) == 2  # the plan and the replan, recorded by the worker with the password


def test_the_docs_postgresql_example_prints_what_it_shows(postgres_cluster, tmp_path):
    """docs/traces.md's "A trace store on PostgreSQL" block, re-run against this session's server: its
    `localhost/traces` (user `planner`, password `s3cret`) is a fresh database here, and what the commands print
    is compared with the page as `tests/test_docs_examples.py` compares (timings masked). `export` lines carry
    over to the commands after them, as in the reader's shell."""
    from test_docs_examples import REPO, masked, run_command, scratch, section_span

    text = (REPO / "docs" / "traces.md").read_text()
    start, end = section_span(text, "## A trace store on PostgreSQL")
    block = re.search(r"```console\n(.*?)```", text[start:end], re.S)
    assert block is not None
    url = postgres_cluster.database_with_password("docsplanner", "s3cret")  # planner is another test's role
    place = url.split("@", 1)[1]  # 127.0.0.1:PORT/NAME
    ours = {
        "planner:s3cret@localhost/traces": f"docsplanner:s3cret@{place}",
        "planner@localhost/traces": f"docsplanner@{place}",
    }
    shown_as = {
        f"docsplanner:***@{place}": "planner:***@localhost/traces",
        f"docsplanner@{place}": "planner@localhost/traces",
    }
    commands: list[tuple[str, list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    folder, exported, status = scratch(tmp_path), [], 0
    for command, shown in commands:
        for page_text, here in ours.items():
            command = command.replace(page_text, here)
        printed, status = run_command("; ".join([*exported, command]), folder, status)
        if command.startswith("export "):
            exported.append(command)
        for here, page_text in shown_as.items():
            printed = [line.replace(here, page_text) for line in printed]
        assert masked(printed) == masked(shown), f"$ {command}"
