"""Search directories (`portfolio-fd-PID-*`) left behind by processes that were killed are swept: by the next
search pool a process makes, and by a server at start; a live process's directory is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

import httpx
import pytest
from test_service_helpers import config, serve_in_thread, small_plan, wait_for, wait_healthy


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_sweep_removes_dead_owners_directories_only(private_tmp):
    from portfolio.engine.search_pool import sweep_stale_dirs

    dead = private_tmp / f"portfolio-fd-{dead_pid()}-abc"
    live = private_tmp / f"portfolio-fd-{os.getppid()}-def"
    legacy = private_tmp / "portfolio-fd-k2j3h4"  # an older release's name, without the owner
    for folder in (dead, live, legacy):
        folder.mkdir()
        (folder / "output-0").write_text("x")
    assert sweep_stale_dirs(str(private_tmp)) == [str(dead)]
    assert not dead.exists() and live.exists() and legacy.exists()


def test_a_replaced_workers_directories_are_swept(private_tmp):
    """A planner worker killed with SIGKILL (as by the OOM killer) never closes its search pool; before, its
    directory stayed for good (11 were left after one review)."""
    with serve_in_thread(config(workers=1)) as (url, svc):
        assert httpx.post(url + "/v1/plan", json=small_plan(), timeout=60).json()["status"] == "solved"
        before = {p.name for p in private_tmp.glob("portfolio-fd-*")}
        assert before
        worker = svc.pool.workers[0]._process
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        wait_for(
            lambda: svc.pool.workers[0].alive and svc.pool.workers[0]._process.pid != worker.pid,
            what="the worker's replacement",
        )
        # the replacement sweeps when it makes its own search pool, which a plan call waits for
        assert httpx.post(url + "/v1/plan", json=small_plan(), timeout=60).json()["status"] == "solved"
        wait_healthy(url)
        after = {p.name for p in private_tmp.glob("portfolio-fd-*")}
    assert not before & after, (before, after)
