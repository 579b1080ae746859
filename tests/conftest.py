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
