"""The trace store: concurrent writers, crash safety, bad files, schema versions, JSONL import/export."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from traces import (
    CorruptDatabaseError,
    SchemaVersionError,
    StepRecord,
    TraceImportError,
    TraceStore,
    export_jsonl,
    import_jsonl,
)
from traces.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent(
    """
    import sys
    from traces import StepRecord, TraceStore
    path, tag, total, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = TraceStore(path)
    for start in range(0, total, batch):
        store.record_steps([
            StepRecord(run_id=tag, step=i, action="drive", args=("t1", "a", tag),
                       outcome="failure" if i % 7 == 0 else "success", duration_ms=1.0)
            for i in range(start, min(start + batch, total))
        ])
        print(min(start + batch, total), flush=True)
    store.close()
    """
)


def _writer(path: Path | str, tag: str, total: int, batch: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), tag, str(total), str(batch)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def step(i: int = 0, **kw) -> StepRecord:
    data = {"run_id": "r1", "step": i, "action": "drive", "args": ["t1", "a", "b"], "outcome": "success"} | kw
    return StepRecord.model_validate(data)


def test_round_trip_runs_plans_steps_models(store_target: str) -> None:
    with TraceStore(store_target) as store:
        run = store.start_run("fp1", "(at p1 b)")
        store.record_plan(run, "fast-downward", [{"delegate": "fd", "status": "solved"}], 12.5, ["(drive t1 a b)"])
        store.record_steps([step(0, outcome="failure", error="flat tyre", features={"weather": "rain"}), step(1)])
        store.end_run(run, "success")
        assert store.get_run(run).outcome == "success"
        assert store.plans(run)[0]["plan"] == ["(drive t1 a b)"]
        steps = list(store.iter_steps())
        assert [s.outcome for s in steps] == ["failure", "success"]
        assert steps[0].features == {"weather": "rain"} and steps[0].error == "flat tyre"
        [stats] = store.stats()
        assert (stats.action, stats.steps, stats.failures, stats.failure_rate) == ("drive", 2, 1, 0.5)
        assert store.latest_model() is None
        assert store.save_model(b"one", {"n": 1}, {}) == 1
        assert store.save_model(b"two", {"n": 2}, {"brier": 0.1}) == 2
        latest = store.latest_model()
        assert (latest.version, latest.blob, latest.metrics) == (2, b"two", {"brier": 0.1})


def test_default_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTFOLIO_TRACES", str(tmp_path / "env.db"))
    with TraceStore() as store:
        assert store.path == str(tmp_path / "env.db")
    assert (tmp_path / "env.db").exists()


def test_wal_mode(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "t.db") as store:
        assert store.db.journal_mode == "wal"


def test_four_processes_writing_at_once_lose_no_row(store_target: str) -> None:
    path = store_target
    writers = [_writer(path, f"w{k}", 10_000, 250) for k in range(4)]
    for proc in writers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with TraceStore(path) as store:
        assert store.count_steps() == 40_000
        for k in range(4):
            rows = store.db.execute("SELECT count(DISTINCT step) FROM steps WHERE run_id = ?", [f"w{k}"]).fetchone()
            assert rows[0] == 10_000


def test_killed_writer_leaves_every_committed_batch(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    proc = _writer(path, "k", 10_000_000, 2000)
    committed = 0
    while committed < 20_000:  # let it commit some batches, then kill it in the middle of later ones
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        committed = int(line)
    time.sleep(0.05)  # time passing is the point: the kill lands anywhere in a later batch, not just after a commit
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for line in proc.stdout.read().split():
        committed = int(line)
    with TraceStore(path) as store:
        count = store.count_steps()
        assert count >= committed
        assert count % 2000 == 0  # whole batches only
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_non_sqlite_file_is_refused_with_path(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 10)
    with pytest.raises(CorruptDatabaseError, match="notes.db.*not an SQLite database"):
        TraceStore(path)
    assert path.read_text().startswith("these are my notes")  # untouched


def test_damaged_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with TraceStore(path) as store:
        store.record_steps([step(i) for i in range(100)])
    with sqlite3.connect(path) as conn:  # fold the WAL back so the damage below hits real pages
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # page 1 after the header: the schema table
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDatabaseError, match=r"t\.db.*damaged"):
        TraceStore(path)


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(CorruptDatabaseError, match="invoices"):
        TraceStore(path)


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    TraceStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}.*newer"):
        TraceStore(path)


def test_migration_sets_user_version(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    TraceStore(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    TraceStore(path).close()  # reopening an up-to-date store migrates nothing


def test_end_unknown_run_is_an_error(store_target: str) -> None:
    from traces import TraceStoreError

    with TraceStore(store_target) as store, pytest.raises(TraceStoreError, match="no run"):
        store.end_run("nope", "success")


JSONL_GOOD = [
    {"run_id": "r1", "step": 0, "action": "drive", "args": ["t1", "a", "b"], "outcome": "success",
     "error": None, "duration_ms": 12.5, "features": {"weather": "rain"}, "timestamp": "2026-01-01T00:00:00Z"},
    {"run_id": "r1", "step": 1, "action": "unload", "args": ["p1", "t1", "b"], "outcome": "failure",
     "error": "package stuck", "failure_category": "transient", "expected_effects": ["(at p1 b)"],
     "observed_effects": [], "generation": 0},
]  # fmt: skip


def _write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_jsonl_import_export_round_trip(store_target: str, tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "in.jsonl", [json.dumps(x) for x in JSONL_GOOD])
    with TraceStore(store_target) as store:
        report = import_jsonl(store, src, strict=True)
        assert report.ok and report.imported == 2
        export_jsonl(store, tmp_path / "out.jsonl")
    back = [StepRecord.model_validate_json(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert back == [StepRecord.model_validate(x) for x in JSONL_GOOD]


BAD_LINES = [
    json.dumps(JSONL_GOOD[0]),
    "{not json",
    json.dumps({**JSONL_GOOD[0], "outcome": "maybe"}),
    json.dumps({k: v for k, v in JSONL_GOOD[0].items() if k != "action"}),
    json.dumps([1, 2]),
    json.dumps(JSONL_GOOD[1]),
]


def test_jsonl_strict_refuses_whole_file(store_target: str, tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "in.jsonl", BAD_LINES)
    with TraceStore(store_target) as store:
        with pytest.raises(TraceImportError) as caught:
            import_jsonl(store, src, strict=True)
        assert store.count_steps() == 0
    assert [line for line, _ in caught.value.problems] == [2, 3, 4, 5]
    message = str(caught.value)
    assert "in.jsonl:2: not valid JSON" in message and "in.jsonl:3: outcome" in message
    assert "in.jsonl:4: action: Field required" in message and "expected a JSON object" in message


def test_jsonl_non_strict_imports_good_lines_and_reports_bad(store_target: str, tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "in.jsonl", BAD_LINES)
    with TraceStore(store_target) as store:
        report = import_jsonl(store, src)
        assert report.imported == 2 and store.count_steps() == 2
    assert [line for line, _ in report.problems] == [2, 3, 4, 5]


def test_jsonl_unknown_key_is_rejected(store_target: str, tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "in.jsonl", [json.dumps({**JSONL_GOOD[0], "outcom": "success"})])
    with TraceStore(store_target) as store, pytest.raises(TraceImportError, match="outcom"):
        import_jsonl(store, src, strict=True)


def test_jsonl_run_id_is_bounded_with_a_clear_message(store_target: str, tmp_path: Path) -> None:
    """Before, a 100,000-character run id was stored with its step."""
    src = _write_jsonl(
        tmp_path / "in.jsonl",
        [json.dumps({**JSONL_GOOD[0], "run_id": "r" * 256}), json.dumps({**JSONL_GOOD[1], "run_id": "r" * 100_000})],
    )
    with TraceStore(store_target) as store:
        report = import_jsonl(store, src)
        assert report.imported == 1 and store.count_steps() == 1
    assert [line for line, _ in report.problems] == [2]
    assert "run_id: String should have at most 256 characters" in report.problems[0][1]


def test_jsonl_binary_file_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\xff\xfe\x00garbage")
    with TraceStore(tmp_path / "t.db") as store, pytest.raises(TraceImportError, match="not UTF-8"):
        import_jsonl(store, src)


def test_prune_models_keeps_the_newest_versions(store_target: str) -> None:
    with TraceStore(store_target) as store:
        for n in range(5):
            store.save_model(b"m%d" % n, {}, {})
        assert store.prune_models(2) == 3 and store.prune_models(2) == 0
        assert store.latest_model().version == 5
        assert [v for (v,) in store.db.execute("SELECT version FROM models ORDER BY version")] == [4, 5]
        assert store.save_model(b"next", {}, {}) == 6  # versions keep counting up
        with pytest.raises(ValueError, match="at least 1"):
            store.prune_models(0)


def test_backup_while_another_process_writes_is_one_consistent_snapshot(tmp_path: Path) -> None:
    from traces import backup

    path = tmp_path / "t.db"
    proc = _writer(path, "b", 10_000_000, 1000)
    while int(proc.stdout.readline() or 0) < 5000:
        pass
    with TraceStore(path) as store:
        size = backup(store, tmp_path / "copy.db")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with TraceStore(tmp_path / "copy.db") as copy:
        assert copy.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count = copy.count_steps()
        assert count >= 5000 and count % 1000 == 0  # whole batches, taken mid-stream
        pages, page_size = (copy.db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
        assert size == pages * page_size


def test_step_chunks_are_fixed_at_the_call_while_others_append(store_target: str) -> None:
    with TraceStore(store_target) as store, TraceStore(store_target) as other:
        store.record_steps([step(i) for i in range(25)])
        chunks = store.iter_step_chunks(("step",), chunk_size=10)
        first = next(chunks)
        other.record_steps([step(i) for i in range(25, 40)])  # lands between chunks
        rest = [row for chunk in chunks for row in chunk]
        assert [s for (s,) in first + rest] == list(range(25))
        assert len(list(store.iter_steps())) == 40
        other.record_steps([step(i, action="fly" if i % 3 else "drive") for i in range(40, 70)])
        flights = list(store.iter_step_chunks(("step", "action"), action="fly", chunk_size=7))
        assert [len(c) for c in flights] == [7, 7, 6]
        assert [s for c in flights for s, a in c] == [i for i in range(40, 70) if i % 3]


def test_task_sources_one_copy_per_task_and_a_schema_2_file_gains_them(tmp_path: Path) -> None:
    """A file written by schema 2 (no task tables) opens and migrates; runs of one task share one copy of it."""
    import sqlite_utils

    from traces.schema import MIGRATIONS
    from traces.task_sources import remember_task_source, task_source

    path = tmp_path / "v2.db"
    db = sqlite_utils.Database(sqlite3.connect(path))
    for step in MIGRATIONS[:2]:
        step(db)
    db.execute("PRAGMA user_version = 2")
    db.conn.commit()
    db.conn.close()
    source = {"domain": "(define (domain d))", "problem": "(define (problem p) (:domain d))", "task": None}
    with TraceStore(path) as store:
        assert task_source(store, "r1") is None
        key = remember_task_source(store, "r1", source)
        assert remember_task_source(store, "r2", dict(reversed(list(source.items())))) == key  # same task
        remember_task_source(store, "r3", source | {"problem": "(define (problem q) (:domain d))"})
        assert task_source(store, "r1") == task_source(store, "r2") == source
        assert task_source(store, "r3")["problem"].startswith("(define (problem q)")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM task_sources").fetchone()[0] == 2


def test_models_are_kept_per_tenant_with_one_sequence_of_versions(store_target: str) -> None:
    with TraceStore(store_target) as store:
        assert store.save_model(b"d1", {}, {}) == 1
        assert store.save_model(b"a1", {}, {}, tenant="acme") == 2
        assert store.save_model(b"a2", {}, {}, tenant="acme") == 3
        assert store.save_model(b"p1", {}, {}, tenant="*") == 4
        assert store.save_model(b"d2", {}, {}) == 5
        assert (store.latest_model().blob, store.latest_model().tenant) == (b"d2", "default")
        assert (store.latest_model("acme").blob, store.latest_model("acme").version) == (b"a2", 3)
        assert store.latest_model("*").blob == b"p1" and store.latest_model("zeta") is None
        assert store.latest_model_version() == 5 and store.latest_model_version("acme") == 3
        assert store.prune_models(1) == 2  # each tenant keeps its newest
        assert [v for (v,) in store.db.execute("SELECT version FROM models ORDER BY version")] == [3, 4, 5]


def test_a_store_of_schema_6_keeps_its_models_as_the_default_tenants(tmp_path: Path) -> None:
    """Before schema 7 one model was fit on every step; the migration makes it the default tenant's, whose
    steps were all such a store held, so planning with it goes on as before the upgrade."""
    import sqlite_utils

    from traces.schema import MIGRATIONS

    path = tmp_path / "v6.db"
    db = sqlite_utils.Database(sqlite3.connect(path))
    for migration in MIGRATIONS[:6]:
        migration(db)
    db.execute("PRAGMA user_version = 6")
    db.conn.execute("INSERT INTO models (created, version, metadata, metrics, blob) VALUES ('x', 4, '{}', '{}', 'm')")
    db.conn.commit()
    db.conn.close()
    with TraceStore(path) as store:
        old = store.latest_model()
        assert old is not None and (old.version, old.tenant, old.blob) == (4, "default", b"m")
        assert store.latest_model("acme") is None
        assert store.save_model(b"a", {}, {}, tenant="acme") == 5
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_tenants_steps_are_those_under_its_prefix(store_target: str) -> None:
    from traces.tenants import tenant_of, tenants_with_steps

    ids = ["r1", "Zed", "@a/1", "@a/2", "@ab/1", "@b/x/y", "@", "@nosep", "~tilde"]
    with TraceStore(store_target) as store:
        store.record_steps(StepRecord(run_id=r, step=0, action="go", outcome="success") for r in ids)
        assert tenants_with_steps(store) == ["a", "ab", "b", "default"]
        runs = {
            tenant: sorted(row[0] for chunk in store.iter_step_chunks(["run_id"], tenant=tenant) for row in chunk)
            for tenant in ("default", "a", "ab", "b", "*")
        }
        assert runs == {
            "default": sorted(["r1", "Zed", "~tilde"]),
            "a": ["@a/1", "@a/2"],
            "ab": ["@ab/1"],
            "b": ["@b/x/y"],
            "*": sorted(ids),
        }
        assert {t: store.count_steps(tenant=t) for t in runs} == {t: len(r) for t, r in runs.items()}
        assert store.count_steps(tenant="a", through=3) == 1  # ids are 1, 2, 3, ...: @a/1 is the third
    assert [tenant_of(r) for r in ("r1", "@a/1", "@b/x/y")] == ["default", "a", "b"]
