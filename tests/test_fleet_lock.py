"""One retrain of a trace store at a time, across processes (`traces.fleet_lock`): `portfolio retrain` exits 2
with what to do, or waits with --wait; `POST /v1/retrain` answers 409 `RetrainRunning` (the MCP tool an error of
that kind), and a job that loses the race fails with the same; no model is written while another process holds
the lock, and a holder killed with SIGKILL leaves no lock behind. On both backends (`store_target`): an `flock`
beside an SQLite file, a session advisory lock on a connection of its own on a live PostgreSQL server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support import REPO, portfolio, wait_until
from test_service_helpers import config, serve_in_thread

from traces import StepRecord
from traces.fleet_lock import FleetBusy, advisory_key, fleet_lock, lock_path
from traces.targets import is_url


def store_with_steps(target: str) -> str:
    from traces.store import TraceStore

    with TraceStore(target) as store:
        store.record_steps(
            StepRecord(run_id=f"r{i}", step=0, action="drive", outcome="failure" if i % 3 else "success")
            for i in range(30)
        )
    return target


def models(db: str) -> int:
    from traces.store import TraceStore

    with TraceStore(db) as store:
        return store.db.execute("SELECT count(*) FROM models").fetchone()[0]


def test_a_second_holder_is_refused_until_the_first_lets_go(store_target):
    db = store_with_steps(store_target)
    with fleet_lock(db, "retrain"):
        with pytest.raises(FleetBusy, match="a retrain is running on this trace store"):
            with fleet_lock(db, "retrain"):
                pass
        with fleet_lock(db, "other"):  # another name is another lock
            pass
    with fleet_lock(db, "retrain"):
        pass
    if not is_url(db):
        assert lock_path(db, "retrain") == os.path.realpath(db) + ".retrain.lock"
    with fleet_lock(":memory:"), fleet_lock(":memory:"):  # nothing another process could share
        pass


def test_a_holder_killed_with_sigkill_leaves_no_lock(store_target):
    db = store_with_steps(store_target)
    code = (
        "import sys, time; from traces.fleet_lock import fleet_lock\n"
        "with fleet_lock(sys.argv[1]):\n print('held', flush=True); time.sleep(600)"  # until killed
    )
    holder = subprocess.Popen([sys.executable, "-c", code, db], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(FleetBusy):
            with fleet_lock(db):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()

    def free() -> bool:
        try:
            with fleet_lock(db):
                return True
        except FleetBusy:
            return False

    wait_until(free, timeout=10, what="the killed holder's lock to go")


def blocked_on_flock(pid: int) -> bool:
    """Whether process `pid` waits for an flock: /proc/locks lists a waiter as "N: -> FLOCK ADVISORY WRITE PID ..."."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and "FLOCK" in fields and fields[fields.index("FLOCK") + 3] == str(pid):
            return True
    return False


def waiting_for_advisory_lock(url: str) -> bool:
    """Whether a session waits for an advisory lock in the database at `url` (pg_locks: not granted)."""
    import psycopg

    sql = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchone()[0] > 0


def waits_for_the_lock(db: str, pid: int) -> bool:
    return waiting_for_advisory_lock(db) if is_url(db) else blocked_on_flock(pid)


def test_the_cli_exits_2_while_a_retrain_runs_and_waits_with_wait(store_target):
    db = store_with_steps(store_target)
    with fleet_lock(db, "retrain"):
        refused = portfolio("retrain", "--traces", db)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "a retrain is running on this trace store" in refused.stderr and "--wait" in refused.stderr
        waiting = subprocess.Popen(
            [sys.executable, "-m", "portfolio.cli", "retrain", "--wait", "--traces", db],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        wait_until(lambda: waits_for_the_lock(db, waiting.pid), timeout=60, what="the second retrain to wait")
        assert models(db) == 0  # neither wrote a model while the lock was held
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert "model version 1" in out and models(db) == 1


def mcp_retrain(url: str):
    """The MCP `retrain` tool's result (streamable HTTP at /mcp)."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with streamable_http_client(url + "/mcp") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("retrain", {})

    return anyio.run(main)


def test_the_service_answers_409_while_another_process_retrains(store_target):
    db = store_with_steps(store_target)
    with serve_in_thread(config(traces=db)) as (url, service):
        with fleet_lock(db, "retrain"):
            refused = httpx.post(url + "/v1/retrain", json={}, timeout=60)
            assert refused.status_code == 409, refused.text
            assert refused.json()["kind"] == "RetrainRunning" and "a retrain is running" in refused.json()["error"]
            tool = mcp_retrain(url)  # the MCP tool too
            assert tool.is_error and "RetrainRunning: a retrain is running" in tool.content[0].text

            # a retrain that started between the server's look and its job's: the job is refused the same way
            async def no_look() -> None:
                return None

            service.check_retrain_elsewhere = no_look
            job = httpx.post(url + "/v1/retrain", json={}, timeout=60)
            assert job.status_code == 202
            done = wait_until(
                lambda: (answer := httpx.get(url + job.headers["location"]).json())["status"] != "running" and answer,
                timeout=60,
                what="the retrain job",
            )
            assert done["status"] == "failed" and done["error"].startswith("RetrainRunning: a retrain is running")
            assert models(db) == 0
        job = httpx.post(url + "/v1/retrain", json={}, timeout=60)
        done = wait_until(
            lambda: (answer := httpx.get(url + job.headers["location"]).json())["status"] != "running" and answer,
            timeout=60,
            what="the retrain job",
        )
        assert done["status"] == "done", done
        assert models(db) == 1


def test_two_concurrent_cli_retrains_never_both_fit(store_target):
    """Started together: one fits; the other is refused (exit 2), unless the first had ended before it began, in
    which case each wrote its own version. Never two models from overlapping fits."""
    db = store_with_steps(store_target)
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "portfolio.cli", "retrain", "--traces", db],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(2)
    ]
    codes = sorted(run.wait(timeout=120) for run in runs)
    assert codes in ([0, 2], [0, 0])
    assert models(db) == codes.count(0)


def test_a_postgresql_lock_is_a_session_of_its_own_that_outlives_the_stores_reconnect(postgres_url):
    """The lock's session is not the store's: the store's shared connection cut by the server (and opened again
    by its next operation) leaves the lock held, the store's own writes (transaction-level write locks) go on
    under it, and a second holder in the same process is refused as one in another process would be."""
    import psycopg

    from traces.store import TraceStore

    key = advisory_key("retrain")
    assert key == advisory_key("retrain") and -(2**63) <= key < 2**63
    with TraceStore(postgres_url) as store, fleet_lock(store, "retrain"):
        with pytest.raises(FleetBusy):
            with fleet_lock(postgres_url, "retrain"):
                pass
        store_pid = store.db.execute("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", [store_pid]).fetchone()[0]
        store.record_steps([StepRecord(run_id="under-lock", step=0, action="drive", outcome="success")])
        assert store.db.execute("SELECT pg_backend_pid()").fetchone()[0] != store_pid  # connected again
        with pytest.raises(FleetBusy):
            with fleet_lock(store, "retrain"):
                pass
    with fleet_lock(postgres_url, "retrain"):  # released with the block
        pass


def test_a_postgresql_lock_on_a_server_that_cannot_be_reached_says_so_without_the_password(postgres_url):
    from traces.errors import StoreUnavailableError

    host = postgres_url.split("@", 1)[1].split("/", 1)[0]
    away = postgres_url.replace("postgres@", "postgres:s3cret@").replace(host, "127.0.0.1:1")  # nothing listens
    with pytest.raises(StoreUnavailableError, match="cannot reach the PostgreSQL server") as caught:
        with fleet_lock(away, "retrain"):
            pass
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)
