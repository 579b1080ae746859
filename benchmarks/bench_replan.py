"""Replanning latency per step on a typed domain of 20 actions, in a warm process (`make bench`, never
`make test`). Target: median <= 5 ms per replan.

    pytest benchmarks/bench_replan.py --benchmark-only      # pytest-benchmark tables
    python -m benchmarks.bench_replan                         # median / p90 per configuration, printed

The domain: ten types in a chain, two alternative actions producing each (20 actions, different costs), some
taking two inputs. A "replan" is one `Planner.plan(task, init=state)` call from a mid-run state, exactly as the
loop makes it (with a trace store: the plan is recorded and learned costs from a stored model are applied).
Configurations: the agent's cascade (in-process exact search first) with and without a trace store and model,
Fast Downward alone (pre-started search process, SAS translation re-used), the whole loop with the
`every-step` trigger (the replan times the loop itself measures), the same loop under `Agent.arun` (planning in
a worker thread via `Planner.aplan`: the thread hand-off is part of what is measured), and 100 async agents
running at once on one shared planner (each replans around a failing action; every run must succeed).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import pytest

from domains.model import Atom
from domains.typed_actions import compile_actions, fact, typed_action

pytestmark = pytest.mark.slow

LAYERS = 10
TYPES = [type(f"T{i}", (), {}) for i in range(LAYERS + 1)]


def actions(fail: set[str] = frozenset()):
    """20 typed actions: for each layer i, `a<i>` (cheap) and `b<i>` (dear) make T<i+1>; b<i> also needs T0."""
    made = []
    for i in range(LAYERS):
        src, dst = TYPES[i], TYPES[i + 1]

        def cheap(x, _dst=dst, _name=f"a{i}"):
            if _name in fail:
                raise TimeoutError(_name)
            return _dst()

        def dear(x, y, _dst=dst):
            return _dst()

        cheap.__annotations__ = {"x": src, "return": dst}
        dear.__annotations__ = {"x": src, "y": TYPES[0], "return": dst}
        cheap.__name__, dear.__name__ = f"a{i}", f"b{i}"
        made.append(typed_action(cheap, cost=1.0 + (i % 3) * 0.5))
        made.append(typed_action(dear, cost=3.0))
    return made


def task_and_states():
    task = compile_actions(actions(), [TYPES[-1]], [fact(TYPES[0])])
    states = [frozenset(fact(TYPES[j]) for j in range(k + 1)) for k in range(LAYERS)]
    return task, states


def make_planner(kind: str, traces: str | None):
    from portfolio.delegates.fast_downward.delegate import FastDownward
    from portfolio.delegates.registry import AGENT_DELEGATES, build_stages
    from portfolio.engine.tiers import Tier
    from portfolio.planner import Planner

    stages = build_stages(AGENT_DELEGATES) if kind == "agent" else [Tier("classical", [FastDownward()], 1.0)]
    return Planner(stages, traces=traces, warm=True)


def seed_model(path: str) -> None:
    """A trace store with a trained model, so that learned costs are on the measured path."""
    from learning.retrain import retrain
    from traces import StepRecord, TraceStore

    with TraceStore(path) as store:
        run = store.start_run("bench", "goal")
        store.record_steps(
            [
                StepRecord(run_id=run, step=i, action=f"a{i % LAYERS}", outcome="failure" if i % 4 == 0 else "success")
                for i in range(200)
            ]
        )
        retrain(store)


def replan_times(planner, task, states: list[frozenset[Atom]], rounds: int) -> list[float]:
    run_id = planner.store.start_run(task.fingerprint, "bench") if planner.store is not None else None
    for state in states:  # warm: translations, learned-cost caches, compiled validator
        assert planner.plan(task, init=state, run_id=run_id).solved
    times = []
    for r in range(rounds):
        state = states[r % len(states)]
        start = time.perf_counter()
        result = planner.plan(task, init=state, run_id=run_id)
        times.append((time.perf_counter() - start) * 1000)
        assert result.solved
    return times


def loop_times(traces: str, rounds: int) -> list[float]:
    from portfolio.agent import Agent

    times: list[float] = []
    with Agent(actions(fail={"a3"}), traces=traces, trigger="every-step", max_retries=0, max_replans=100) as agent:
        for _ in range(rounds):
            result = agent.run(TYPES[0](), goal=TYPES[-1])
            assert result.succeeded
            times.extend(r.ms for r in result.replans)
    return times


def async_loop_times(rounds: int) -> list[float]:
    """`every-step` replans measured by the loop under `Agent.arun`, one agent at a time."""
    from portfolio.agent import Agent

    async def main() -> list[float]:
        times: list[float] = []
        with Agent(actions(fail={"a3"}), trigger="every-step", max_retries=0, max_replans=100) as agent:
            for _ in range(rounds):
                result = await agent.arun(TYPES[0](), goal=TYPES[-1])
                assert result.succeeded
                times.extend(r.ms for r in result.replans)
        return times

    return asyncio.run(main())


def concurrent_agents(count: int = 100) -> tuple[float, list[float], int]:
    """`count` agents (each with its own actions, a3 failing) run at once on one planner with the default
    trigger: (wall ms, replan ms of every agent, runs that failed). Raises if any run raises."""
    from portfolio.agent import Agent
    from portfolio.delegates.registry import AGENT_DELEGATES, build_stages
    from portfolio.planner import Planner

    async def main() -> tuple[float, list[float], int]:
        with Planner(build_stages(AGENT_DELEGATES), warm=True) as planner:
            agents = [Agent(actions(fail={"a3"}), planner=planner, max_retries=0) for _ in range(count)]
            started = time.perf_counter()
            results = await asyncio.gather(*(a.arun(TYPES[0](), goal=TYPES[-1]) for a in agents))
            wall = (time.perf_counter() - started) * 1000
        return wall, [r.ms for res in results for r in res.replans], sum(not r.succeeded for r in results)

    return asyncio.run(main())


def summary(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))]


CONFIGS = ("agent", "agent+traces", "fast-downward")


def measure(config: str, rounds: int, folder: str) -> list[float]:
    task, states = task_and_states()
    traces = None
    if config != "fast-downward" and config.endswith("traces"):
        traces = str(Path(folder) / f"{config}.db")
        seed_model(traces)
    with make_planner("fd" if config == "fast-downward" else "agent", traces) as planner:
        return replan_times(planner, task, states, rounds)


@pytest.mark.parametrize("config", CONFIGS)
def test_replan_latency(benchmark, config, tmp_path):
    task, states = task_and_states()
    traces = None
    if config.endswith("traces"):
        traces = str(tmp_path / "t.db")
        seed_model(traces)
    with make_planner("fd" if config == "fast-downward" else "agent", traces) as planner:
        replan_times(planner, task, states, 5)
        cycle = iter(range(10**9))
        run_id = planner.store.start_run(task.fingerprint, "bench") if planner.store is not None else None
        benchmark(lambda: planner.plan(task, init=states[next(cycle) % len(states)], run_id=run_id))


def test_loop_replan_latency(benchmark, tmp_path):
    times = benchmark.pedantic(lambda: loop_times(str(tmp_path / "loop.db"), 5), rounds=1, iterations=1)
    median, p90 = summary(times)
    benchmark.extra_info.update(replans=len(times), median_ms=round(median, 3), p90_ms=round(p90, 3))


def test_async_loop_replan_latency(benchmark):
    times = benchmark.pedantic(lambda: async_loop_times(5), rounds=1, iterations=1)
    median, p90 = summary(times)
    benchmark.extra_info.update(replans=len(times), median_ms=round(median, 3), p90_ms=round(p90, 3))


def test_concurrent_async_agents_on_one_planner(benchmark):
    wall, times, failed = benchmark.pedantic(concurrent_agents, rounds=1, iterations=1)
    assert failed == 0 and len(times) == 100  # one replan (around a3) per agent
    benchmark.extra_info.update(wall_ms=round(wall, 1), replan_median_ms=round(summary(times)[0], 3))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for config in CONFIGS:
            times = measure(config, 300 if config != "fast-downward" else 100, folder)
            median, p90 = summary(times)
            print(
                f"{config:14} replan via Planner.plan: median {median:6.2f} ms, p90 {p90:6.2f} ms ({len(times)} calls)"
            )
        times = loop_times(str(Path(folder) / "loop.db"), 30)
        median, p90 = summary(times)
        print(
            f"{'loop':14} every-step replans measured by the loop: median {median:6.2f} ms, p90 {p90:6.2f} ms "
            f"({len(times)} replans)"
        )
        times = async_loop_times(30)
        median, p90 = summary(times)
        print(
            f"{'async loop':14} every-step replans under Agent.arun: median {median:6.2f} ms, p90 {p90:6.2f} ms "
            f"({len(times)} replans)"
        )
        wall, times, failed = concurrent_agents(100)
        median, p90 = summary(times)
        print(
            f"{'100 agents':14} at once on one planner: {wall:7.0f} ms wall, {failed} failed runs, replan median "
            f"{median:6.2f} ms, p90 {p90:6.2f} ms ({len(times)} replans)"
        )


if __name__ == "__main__":
    main()
