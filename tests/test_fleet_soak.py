"""The fleet soak's core (`benchmarks.experiments.fleet_soak.soak`) for a few seconds: two replicas on one SQLite
file, two clients, one replica killed with SIGKILL mid-load and started again. Every step a replica acknowledged
is in the store once, no replan hands back a step that ran, and no request fails while a replica is up."""

from __future__ import annotations

from benchmarks.experiments.fleet_soak import soak


def test_a_replica_killed_mid_load_loses_no_acknowledged_step(tmp_path):
    report = soak(
        str(tmp_path / "t.db"), clients=2, seconds=8, kill_at=2, restart_after=2, log=tmp_path / "log",
        restart_store="true", restart_store_at=1,  # the hook a PostgreSQL run restarts its server with
    )  # fmt: skip
    events = [event.split()[0] for event in report["events"]]
    assert events == ["store", "kill", "restart"] and "exited 0" in report["events"][0], report
    assert report["runs_completed"] > 0 and report["steps_acknowledged"] > 0, report
    assert report["acknowledged_missing"] == 0 and report["stored_twice"] == 0, report
    assert report["wrong_plans"] == [] and report["failed"] == {}, report
