"""Trace store and learning throughput (pytest-benchmark; `make bench`, never `make test`).

Targets: ingest >= 20,000 steps/s in batches; retrain on 1,000,000 steps <= 60 s on 2 cores; predict_proba for
3,000 grounded actions in a few ms. Run alone: `pytest benchmarks/bench_traces.py --benchmark-only`; on a
shared, loaded machine add `--benchmark-timer time.process_time` (CPU time: wall time there measures the
neighbours). Measured with one shared connection and a lock per transaction, at load 13 on 2 cores, best
of 5: record_steps 96,000 steps/s of CPU time (98,000 before), 23,000 wall; JSONL import 40,000 CPU (42,000
before). Idempotent recording (each batch looks its (run_id, step) keys up before writing), measured
against the code before it at load 2-3, 3 rounds: record_steps 78,000 steps/s of CPU time (100,000 before),
JSONL import 32,000 (41,000 before). The store on PostgreSQL (`test_ingest_record_steps_postgresql`, local server,
fsync off, load 1.5): 63,800 steps/s wall, 77,000 of the client's CPU time, where SQLite gave 88,300 and 93,700
(docs/decisions/postgresql-store.md). With fsync on, COPY, HTTP ingest and the retrain on both backends:
docs/benchmarks.md, "A fleet on PostgreSQL". The fault-injection and soak loops are `tests/test_store_faults.py` and
`benchmarks/experiments/store_soak.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from domains.model import GroundAction
from learning import load_latest, retrain
from traces import StepRecord, TraceStore, import_jsonl

pytestmark = pytest.mark.slow

NAMES = ["drive", "fly", "load", "unload", "pick", "drop", "move", "stack"]
WEATHER = ["sun", "cloud", "rain"]


def synthetic_rows(n: int, seed: int = 0) -> list[tuple]:
    """Steps as `steps` rows: 8 actions over 40 objects; failing more into o7 and in the rain (~10% overall)."""
    rng = np.random.default_rng(seed)
    a, o1, o2 = rng.integers(0, len(NAMES), n), rng.integers(0, 40, n), rng.integers(0, 40, n)
    w, load = rng.integers(0, 3, n), rng.random(n).round(2)
    fail = rng.random(n) < 1 / (1 + np.exp(-(-3.0 + 2.5 * (o2 == 7) + 1.5 * (w == 2))))
    return [
        (f"r{i // 50}", i % 50, NAMES[a[i]], f'["o{o1[i]}","o{o2[i]}"]',
         json.dumps({"load": float(load[i]), "weather": WEATHER[w[i]]}, separators=(",", ":"), sort_keys=True),
         "failure" if fail[i] else "success", None, None, 5.0, None, None, None, None, None)
        for i in range(n)
    ]  # fmt: skip


def synthetic_records(n: int) -> list[StepRecord]:
    return [
        StepRecord(run_id="r", step=i, action=NAMES[i % 8], args=(f"o{i % 40}", f"o{(i * 7) % 40}"),
                   outcome="failure" if i % 10 == 0 else "success", duration_ms=5.0, features={"weather": "rain"})
        for i in range(n)
    ]  # fmt: skip


def fill_million(store: TraceStore) -> TraceStore:
    rows = synthetic_rows(1_000_000)
    for start in range(0, len(rows), 50_000):
        store._record_rows(rows[start : start + 50_000])
    del rows  # before the measured retrain: the peak memory of a benchmark in this module is its own
    return store


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def million_store(request, tmp_path_factory: pytest.TempPathFactory) -> TraceStore:
    """1,000,000 steps in an SQLite file, or in the PostgreSQL database of `PORTFOLIO_BENCH_POSTGRES` (emptied
    first)."""
    if request.param == "sqlite":
        target = str(tmp_path_factory.mktemp("bench") / "million.db")
    else:
        target = bench_postgres()
        empty_database(target)
    store = fill_million(TraceStore(target))
    yield store
    store.close()


def test_ingest_record_steps(benchmark, tmp_path: Path) -> None:
    """100,000 StepRecords through record_steps in batches of 5,000 (one transaction each)."""
    records = synthetic_records(100_000)
    counter = iter(range(1000))

    def ingest() -> None:
        with TraceStore(tmp_path / f"ingest{next(counter)}.db") as store:
            for start in range(0, len(records), 5000):
                store.record_steps(records[start : start + 5000])

    benchmark.pedantic(ingest, rounds=3, iterations=1)
    benchmark.extra_info["steps_per_s"] = round(100_000 / benchmark.stats.stats.median)


def bench_postgres() -> str:
    """`PORTFOLIO_BENCH_POSTGRES`: the URL of an empty database the PostgreSQL benchmarks fill (its tables are
    dropped between rounds); they are skipped without it."""
    url = os.environ.get("PORTFOLIO_BENCH_POSTGRES")
    if not url:
        pytest.skip("set PORTFOLIO_BENCH_POSTGRES=postgresql://USER@HOST/DB (an empty database) to measure it")
    return url


def empty_database(url: str) -> tuple[tuple, dict]:
    """Drop every table of the database at `url` (a benchmark's `setup`: each round starts from nothing)."""
    with TraceStore(url) as store:
        store.db.execute("DROP SCHEMA public CASCADE")
        store.db.execute("CREATE SCHEMA public")
    return (), {}


@pytest.mark.parametrize("batch", [100, 5000])
@pytest.mark.parametrize("path", ["copy", "executemany"])
def test_ingest_record_steps_postgresql(benchmark, monkeypatch, path: str, batch: int) -> None:
    """The same 100,000 steps into PostgreSQL (`bench_postgres`) in batches of `batch`, the new rows sent by COPY
    or by executemany (`traces.backends.COPY_MIN_ROWS` set to send every batch one way)."""
    from traces import backends

    url = bench_postgres()
    monkeypatch.setattr(backends, "COPY_MIN_ROWS", 0 if path == "copy" else 10**9)
    records = synthetic_records(100_000)

    def ingest() -> None:
        with TraceStore(url) as store:
            for start in range(0, len(records), batch):
                store.record_steps(records[start : start + batch])

    benchmark.pedantic(ingest, setup=lambda: empty_database(url), rounds=3, iterations=1)
    benchmark.extra_info["steps_per_s"] = round(100_000 / benchmark.stats.stats.median)


def test_ingest_jsonl_postgresql(benchmark, tmp_path: Path) -> None:
    """`traces import` of 100,000 JSONL lines into PostgreSQL (`bench_postgres`), in one transaction."""
    url = bench_postgres()
    src = tmp_path / "steps.jsonl"
    src.write_text("\n".join(r.model_dump_json(exclude_none=True) for r in synthetic_records(100_000)) + "\n")

    def ingest() -> None:
        with TraceStore(url) as store:
            assert import_jsonl(store, src, strict=True).imported == 100_000

    benchmark.pedantic(ingest, setup=lambda: empty_database(url), rounds=3, iterations=1)
    benchmark.extra_info["steps_per_s"] = round(100_000 / benchmark.stats.stats.median)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_ingest_http(benchmark, tmp_path: Path, backend: str) -> None:
    """100,000 steps POSTed to `/v1/steps` of `portfolio serve --workers 1` in batches of 5,000, one after another
    on one keep-alive connection, each under an `Idempotency-Key`; into an SQLite file or the PostgreSQL
    database of `bench_postgres`."""
    import httpx

    from benchmarks.bench_service import launch, stop_server

    target = str(tmp_path / "http.db") if backend == "sqlite" else bench_postgres()
    batches = [
        [r.model_dump(mode="json", exclude_none=True) for r in synthetic_records(100_000)[start : start + 5000]]
        for start in range(0, 100_000, 5000)
    ]
    servers: list = []  # the round's server, started in `setup` (its start-up is not measured)

    def setup() -> tuple[tuple, dict]:
        while servers:
            stop_server(servers.pop()[0])
        if backend == "postgresql":
            empty_database(target)
        else:
            for file in tmp_path.glob("http.db*"):
                file.unlink()
        servers.append(launch(["--workers", "1", "--insecure", "--traces", target]))
        return (), {}

    def ingest() -> None:
        with httpx.Client(base_url=servers[0][1], timeout=120) as http:
            for index, batch in enumerate(batches):
                answer = http.post("/v1/steps", json={"steps": batch}, headers={"Idempotency-Key": f"batch-{index}"})
                assert answer.status_code == 200, answer.text

    try:
        benchmark.pedantic(ingest, setup=setup, rounds=3, iterations=1)
    finally:
        while servers:
            stop_server(servers.pop()[0])
    benchmark.extra_info["steps_per_s"] = round(100_000 / benchmark.stats.stats.median)


def test_ingest_jsonl(benchmark, tmp_path: Path) -> None:
    """100,000 JSONL lines parsed, validated and imported in one transaction."""
    src = tmp_path / "steps.jsonl"
    src.write_text("\n".join(r.model_dump_json(exclude_none=True) for r in synthetic_records(100_000)) + "\n")
    counter = iter(range(1000))

    def ingest() -> None:
        with TraceStore(tmp_path / f"jsonl{next(counter)}.db") as store:
            assert import_jsonl(store, src, strict=True).imported == 100_000

    benchmark.pedantic(ingest, rounds=3, iterations=1)
    benchmark.extra_info["steps_per_s"] = round(100_000 / benchmark.stats.stats.median)


RETRAIN = """
import json, resource, sys
from learning import retrain
from traces import TraceStore
with TraceStore(sys.argv[1]) as store:
    info = retrain(store)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
print(json.dumps({"n_steps": info.n_steps, "auc": info.metrics.get("auc"), "peak_rss_mb": round(peak)}))
"""


def test_retrain_one_million_steps(benchmark, million_store: TraceStore) -> None:
    """Stream 1,000,000 steps from the store (SQLite or PostgreSQL), hold out the newest 20%, fit twice, store
    the model: in a process of its own, as `portfolio retrain` runs, so that its peak resident memory is the
    retrain's (interpreter start and imports included in the time, ~1 s)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]

    def run() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", RETRAIN, million_store.path], capture_output=True, text=True, check=True, cwd=repo
        )
        return json.loads(done.stdout.splitlines()[-1])

    info = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(info)
    assert info["n_steps"] == 1_000_000


def test_predict_three_thousand_actions(benchmark, million_store: TraceStore) -> None:
    if million_store.latest_model() is None:
        retrain(million_store)
    model = load_latest(million_store)
    actions = [GroundAction(NAMES[i % 4], (f"o{i % 40}", f"o{(i * 7) % 40}")) for i in range(3000)]
    p = benchmark(model.predict_proba, actions, {"weather": "rain", "load": 0.3})
    assert p.shape == (3000,)
