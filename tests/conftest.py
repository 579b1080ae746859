"""Shared fixtures (one warm Planner per test session) and the test environment; helpers are in support.py."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# `portfolio plan` keeps translations in the user's cache directory by default: tests (and the CLI processes
# they start, which inherit the environment) use a throw-away one instead, never the user's.
_CACHE_HOME = tempfile.mkdtemp(prefix="portfolio-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME
atexit.register(shutil.rmtree, _CACHE_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def planner():
    from portfolio.planner import Planner

    with Planner() as shared:
        yield shared


@pytest.fixture(scope="module")
def classical_planner():
    """A warm Planner of the classical delegates alone (Fast Downward, pyperplan), budgets generous: for a
    module that tests what the plans are (exclusion, reuse), not how fast they come."""
    from portfolio.planner import Planner

    with Planner(["fast-downward", "pyperplan"], budget_s=10.0) as shared:
        yield shared


@pytest.fixture(scope="module")
def quiet_up_credits():
    """unified-planning prints each engine's credits to stdout when it is first made: silenced for a module's
    tests (`pytestmark = pytest.mark.usefixtures("quiet_up_credits")`), restored after."""
    from unified_planning.shortcuts import get_environment

    environment = get_environment()
    saved, environment.credits_stream = environment.credits_stream, None
    yield
    environment.credits_stream = saved


@pytest.fixture
def own_folder(tmp_path, monkeypatch):
    """A test's own current folder: unified-planning's Fast Downward engines translate into `output.sas` in the
    current folder, so two of them running at once in one folder (two xdist workers) can search each other's
    task and return a plan of actions the problem does not have."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- trace stores on both backends -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_cluster():
    """A throw-away PostgreSQL cluster for this test session (one per xdist worker), started on first use and
    stopped at the session's end, failed or not; the tests that need it are skipped, saying why, where
    PostgreSQL's server programs are not installed, and fail under CI=true (`.ci/run` installs Debian's
    `postgresql`)."""
    from support import PostgresCluster, postgres_bin

    bin_dir = postgres_bin()
    if bin_dir is None:
        if os.environ.get("CI") == "true":  # CI must run every store test on both backends
            pytest.fail("CI=true but PostgreSQL is not installed (.ci/run installs it with apt-get)")
        pytest.skip("PostgreSQL is not installed (no pg_ctl on PATH or in /usr/lib/postgresql/*/bin)")
    cluster = PostgresCluster(bin_dir)
    atexit.register(cluster.stop)  # also if the session is interrupted before the fixture's teardown
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster) -> str:
    """The URL of a fresh, empty PostgreSQL database of the session's cluster."""
    return postgres_cluster.database()


@pytest.fixture(params=["sqlite", "postgresql"])  # support.BACKENDS
def store_target(request, tmp_path) -> str:
    """Where a test's trace store lives, once on each backend: an SQLite file's path in `tmp_path`, or the URL of
    a fresh PostgreSQL database. `TraceStore(store_target)` opens either."""
    if request.param == "sqlite":
        return str(tmp_path / "t.db")
    return request.getfixturevalue("postgres_url")
