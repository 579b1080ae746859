"""`Agent(objective="time")` closed loop: from its own recorded runs it learns that a quick tool whose failures
are transient (and retried) costs less time than a slow solid one, and takes it; under `risk` the agent keeps
the slow one. Real steps, real durations (the slow tool sleeps), a real trace store."""

from __future__ import annotations

import time
from dataclasses import dataclass

from domains.typed_actions import action
from portfolio.agent import Agent
from traces.store import TraceStore


@dataclass
class Start:
    text: str = "go"


@dataclass
class Data:
    v: int = 0


@dataclass
class Report:
    v: int = 0


def tools():
    calls = {"fast": 0}

    @action(cost=1)
    def fetch_slow(s: Start) -> Data:
        time.sleep(0.03)  # a slow tool: its time is what the test measures
        return Data(1)

    @action(cost=2)
    def fetch_fast(s: Start) -> Data:
        calls["fast"] += 1
        if calls["fast"] % 2:  # every other call: a 503, which the loop retries
            raise TimeoutError("503 service unavailable")
        return Data(2)

    @action(cost=1, goal=True)
    def write(d: Data) -> Report:
        return Report(d.v)

    return [fetch_slow, fetch_fast, write]


def fetches(path, runs) -> list[list[str]]:
    with TraceStore(path) as store:
        steps = list(store.iter_steps())
    return [[s.ground for s in steps if s.run_id == r.run_id and s.action.startswith("fetch")] for r in runs]


def test_the_time_objective_takes_the_quick_flaky_tool_and_risk_the_slow_one(tmp_path):
    used = {}
    for objective in ("risk", "time"):
        path = tmp_path / f"{objective}.db"
        with Agent(tools(), traces=path, objective=objective, learn_every=1, warm=False, backoff_s=0.0) as agent:
            runs = [agent.run(Start(), goal=Report) for _ in range(5)]
        assert all(r.succeeded for r in runs)
        used[objective] = fetches(path, runs)
    assert used["risk"][-1] == ["(fetch-slow)"]
    # time: tried the untried quick tool, learned it fails every other call but is retried in no time, kept it
    assert used["time"][-1] in (["(fetch-fast)"], ["(fetch-fast)", "(fetch-fast)"])
    assert ["(fetch-fast)", "(fetch-fast)"] in used["time"]  # a 503 retried, recorded as two steps
