"""The fleet soak's core (`benchmarks.experiments.fleet_soak.soak`) for a few seconds: two replicas on one store,
two clients, one replica killed with SIGKILL mid-load and started again; on PostgreSQL the server restarted
mid-load too. Every step a replica acknowledged is in the store once, no replan hands back a step that ran, and no
request fails while a replica is up (and, on PostgreSQL, the replicas reconnect on their own)."""

from __future__ import annotations

import pytest
from support import PostgresCluster, postgres_bin

from benchmarks.experiments.fleet_soak import soak


def check(report: dict) -> None:
    events = [event.split()[0] for event in report["events"]]
    assert events == ["store", "kill", "restart"] and "exited 0" in report["events"][0], report
    assert report["runs_completed"] > 0 and report["steps_acknowledged"] > 0, report
    assert report["acknowledged_missing"] == 0 and report["stored_twice"] == 0, report
    assert report["wrong_plans"] == [] and report["failed"] == {}, report


def test_a_replica_killed_mid_load_loses_no_acknowledged_step(tmp_path):
    report = soak(
        str(tmp_path / "t.db"), clients=2, seconds=8, kill_at=2, restart_after=2, log=tmp_path / "log",
        restart_store="true", restart_store_at=1,  # the hook a PostgreSQL run restarts its server with
    )  # fmt: skip
    check(report)


@pytest.mark.serial  # no request may fail across the restart: the load balancer's retries span 2 s
def test_a_postgresql_server_restarted_and_a_replica_killed_mid_load_lose_no_acknowledged_step(tmp_path):
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (no pg_ctl on PATH or in /usr/lib/postgresql/*/bin)")
    cluster = PostgresCluster(bin_dir)  # its own: the restart would cut the session cluster's other users
    try:
        report = soak(
            cluster.database("soak"), clients=2, seconds=8, kill_at=3, restart_after=2, log=tmp_path / "log",
            restart_store=cluster.restart_command(), restart_store_at=1,
        )  # fmt: skip
    finally:
        cluster.stop()
    check(report)
