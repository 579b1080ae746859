"""Idempotent recording: a step is identified by (run_id, step). Recording it again - a second
`portfolio traces import` of one file, a retried POST /v1/steps or MCP `record_steps` - changes nothing and is
reported as skipped; a step with that id and other content is reported as a conflict and not added. Old stores,
which may hold the doubled steps of earlier imports, migrate to schema 4 without losing a row."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
import sqlite_utils
from support import REPO
from test_service_helpers import config, mcp_record_steps, serve_in_thread

from traces import StepConflictError, StepRecord, TraceStore, export_jsonl, import_jsonl

LINES = [
    {
        "run_id": "r1",
        "step": i,
        "action": "drive",
        "args": ["t1", "a", "b"],
        "duration_ms": 10.0,
        "outcome": "failure" if i % 4 == 0 else "success",
        "features": {"weather": "rain", "hour": i},
    }
    for i in range(8)
]


def portfolio(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "portfolio.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO)},
    )


def write(path: Path, lines: list[dict]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def stats(db: str) -> list[dict]:
    done = portfolio("traces", "stats", "--json", "--traces", db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_importing_a_file_twice_changes_nothing_and_says_so(tmp_path):
    db, steps = str(tmp_path / "t.db"), write(tmp_path / "steps.jsonl", LINES)
    first = portfolio("traces", "import", steps, "--traces", db)
    assert first.returncode == 0 and "imported 8 step(s)" in first.stdout, first.stderr
    before = stats(db)
    assert before[0]["steps"] == 8 and before[0]["failures"] == 2
    again = portfolio("traces", "import", steps, "--traces", db)
    assert again.returncode == 0, again.stderr
    assert "imported 0 step(s)" in again.stdout and "skipped 8 already recorded" in again.stdout
    assert stats(db) == before  # not doubled


def test_an_export_imported_back_is_all_skipped(store_target: str, tmp_path):
    """The exported JSON differs from the imported text (key order, left-out nulls): compared as records."""
    with TraceStore(store_target) as store:
        assert import_jsonl(store, write(tmp_path / "in.jsonl", LINES)).imported == 8
        export_jsonl(store, tmp_path / "out.jsonl")
        report = import_jsonl(store, tmp_path / "out.jsonl")
        assert (report.imported, report.skipped, report.ok, store.count_steps()) == (0, 8, True, 8)


def test_a_conflicting_line_is_reported_with_its_line_and_not_added(tmp_path):
    db = str(tmp_path / "t.db")
    assert portfolio("traces", "import", write(tmp_path / "a.jsonl", LINES), "--traces", db).returncode == 0
    changed = [LINES[0] | {"step": 8}, LINES[1] | {"outcome": "failure", "error": "flat tyre"}, LINES[2]]
    path = write(tmp_path / "b.jsonl", changed)
    strict = portfolio("traces", "import", path, "--strict", "--traces", db)
    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert f"{path}:2:" in strict.stderr and "already recorded with a different outcome, error" in strict.stderr
    assert stats(db)[0]["steps"] == 8  # --strict: not even the new line 1 went in
    loose = portfolio("traces", "import", path, "--traces", db)
    assert loose.returncode == 1 and "imported 1 step(s)" in loose.stdout and "skipped 1 already" in loose.stdout
    assert f"{path}:2: skipped: step 1 of run 'r1' is already recorded" in loose.stderr
    [row] = stats(db)
    assert (row["steps"], row["failures"]) == (9, 3)  # the new step 8 (a failure); step 1 still a success


def test_duplicates_within_one_batch_and_the_python_report(store_target):
    with TraceStore(store_target) as store:
        step = StepRecord(run_id="r", step=0, action="(pick-up b)", outcome="success")
        other = step.model_copy(update={"outcome": "failure"})
        report = store.record_steps([step, step, other])
        assert (report.recorded, report.skipped) == (1, 1)
        [conflict] = report.conflicts
        assert (conflict.run_id, conflict.step, conflict.index, conflict.fields) == ("r", 0, 2, ("outcome",))
        with pytest.raises(StepConflictError, match="step 0 of run 'r'"):
            store.record_steps([step.model_copy(update={"step": 1}), other], all_or_nothing=True)
        assert [s.outcome for s in store.iter_steps()] == ["success"]  # all or nothing: step 1 not written


def test_a_schema_3_store_with_doubled_steps_migrates_without_losing_a_row(tmp_path):
    from traces.rows import STEP_COLUMNS, step_row
    from traces.schema import MIGRATIONS

    path = tmp_path / "v3.db"
    db = sqlite_utils.Database(sqlite3.connect(path))
    for migration in MIGRATIONS[:3]:
        migration(db)
    db.execute("PRAGMA user_version = 3")
    rows = [step_row(StepRecord.model_validate(line)) for line in LINES]
    columns = [c for c in STEP_COLUMNS if c != "side_effects"]  # schema 5's column: not in a schema 3 file
    rows = [row[: len(columns)] for row in rows]
    sql = f"INSERT INTO steps ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    db.conn.executemany(sql, rows + rows + rows[:1])  # imported twice by the old code, and step 0 once more
    db.conn.commit()
    db.conn.close()
    with TraceStore(path) as store:
        assert store.count_steps() == 17  # every row kept
        report = store.record_steps([StepRecord.model_validate(line) for line in LINES])
        assert (report.recorded, report.skipped, report.conflicts) == (0, 8, [])
        assert store.count_steps() == 17
    with sqlite3.connect(path) as conn:
        copies = conn.execute("SELECT copy, count(*) FROM steps GROUP BY copy ORDER BY copy").fetchall()
        assert copies == [(0, 8), (1, 8), (2, 1)]
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):  # SQLite holds the line too
            conn.execute(sql, rows[3])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_in_thread(config(traces=str(tmp_path_factory.mktemp("idem") / "t.db"))) as (url, svc):
        yield url, svc


def post_http(url: str, steps: list[dict]) -> dict:
    answer = httpx.post(url + "/v1/steps", json={"steps": steps}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.parametrize("post", [post_http, mcp_record_steps], ids=["http", "mcp"])
def test_a_retried_post_is_skipped_and_a_conflict_is_answered(server, post):
    url, svc = server
    steps = [line | {"run_id": post.__name__} for line in LINES]
    assert post(url, steps) == {"recorded": 8, "skipped": 0, "conflicts": []}
    assert post(url, steps) == {"recorded": 0, "skipped": 8, "conflicts": []}  # the retry
    answer = post(url, [steps[3] | {"outcome": "failure"}, steps[0] | {"step": 8}])
    assert (answer["recorded"], answer["skipped"]) == (1, 0)
    [conflict] = answer["conflicts"]
    assert conflict["run_id"] == post.__name__ and (conflict["step"], conflict["index"]) == (3, 0)
    assert conflict["fields"] == ["outcome"] and "already recorded" in conflict["message"]
    recorded = [s for s in svc.store.iter_steps() if s.run_id == post.__name__]
    assert len(recorded) == 9 and recorded[3].outcome == "success"


def post_keyed_http(url: str, steps: list[dict], key: str | None) -> tuple[int, dict]:
    """POST /v1/steps with the key in the `Idempotency-Key` header: (status, answer)."""
    headers = {"Idempotency-Key": key} if key is not None else {}
    answer = httpx.post(url + "/v1/steps", json={"steps": steps}, headers=headers, timeout=30)
    return answer.status_code, answer.json()


def post_keyed_mcp(url: str, steps: list[dict], key: str | None) -> tuple[int, dict]:
    """MCP `record_steps` with the key as the `idempotency_key` argument: (200 or 422 from the error's kind, answer)."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with streamable_http_client(url + "/mcp") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                arguments = {"steps": steps} | ({"idempotency_key": key} if key is not None else {})
                return await session.call_tool("record_steps", arguments)

    result = anyio.run(main)
    if result.is_error:
        text = result.content[0].text
        return (422 if "IdempotencyKeyReused: " in text else 400), {"error": text}
    return 200, result.structured_content


def rows(svc, run_id: str) -> int:
    return svc.store.db.execute("SELECT count(*) FROM steps WHERE run_id = ?", [run_id]).fetchone()[0]


@pytest.mark.parametrize("post", [post_keyed_http, post_keyed_mcp], ids=["http-header", "mcp-argument"])
def test_a_batch_under_an_idempotency_key_is_recorded_once_and_answered_as_the_first_time(server, post):
    url, svc = server
    run = f"keyed-{post.__name__}"
    steps = [line | {"run_id": run} for line in LINES]
    first = post(url, steps, f"batch-1-{run}")
    assert first == (200, {"recorded": 8, "skipped": 0, "conflicts": []})
    assert post(url, steps, f"batch-1-{run}") == first  # the retry: the first answer, not "skipped 8"
    # the same batch spelled another way (a plan step's spelling, other key order) is the same batch
    spelled = [{k: v for k, v in reversed(s.items()) if k != "args"} | {"action": "(drive t1 a b)"} for s in steps]
    assert post(url, spelled, f"batch-1-{run}") == first
    assert rows(svc, run) == 8
    # other steps under that key: refused, nothing written
    status, answer = post(url, [steps[0] | {"step": 8}], f"batch-1-{run}")
    assert status == 422 and "first used at" in answer["error"] and "other steps" in answer["error"]
    assert rows(svc, run) == 8
    # a new key: recorded as any batch is, so the steps already there are skipped
    assert post(url, steps, f"batch-2-{run}") == (200, {"recorded": 0, "skipped": 8, "conflicts": []})


def test_an_idempotency_key_is_kept_across_a_restart_and_checked(tmp_path):
    db = str(tmp_path / "t.db")
    steps = [line | {"run_id": "restarted"} for line in LINES]
    with serve_in_thread(config(traces=db)) as (url, _):
        first = post_keyed_http(url, steps[:5], "k")
        assert first == (200, {"recorded": 5, "skipped": 0, "conflicts": []})
    with serve_in_thread(config(traces=db)) as (url, svc):
        assert post_keyed_http(url, steps[:5], "k") == first
        assert post_keyed_http(url, steps, "k")[0] == 422
        assert rows(svc, "restarted") == 5
        both = httpx.post(
            url + "/v1/steps", json={"steps": steps, "idempotency_key": "a"}, headers={"Idempotency-Key": "b"}
        )
        assert both.status_code == 400 and "differ" in both.json()["error"]
        long = httpx.post(url + "/v1/steps", json={"steps": steps}, headers={"Idempotency-Key": "x" * 257})
        assert long.status_code == 400 and long.json()["kind"] == "SchemaError"
        assert rows(svc, "restarted") == 5


def test_the_store_replays_a_keyed_batch_and_forgets_old_keys(store_target):
    from traces import IdempotencyKeyReused
    from traces.recording import KEEP_BATCHES_DAYS

    with TraceStore(store_target) as store:
        steps = [StepRecord.model_validate(line) for line in LINES]
        first = store.record_steps(steps, idempotency_key="k")
        again = store.record_steps(steps, idempotency_key="k")
        assert (first.recorded, first.replayed) == (8, False) and (again.recorded, again.replayed) == (8, True)
        with pytest.raises(IdempotencyKeyReused, match="other steps"):
            store.record_steps(steps[:1], idempotency_key="k")
        assert store.count_steps() == 8
        assert KEEP_BATCHES_DAYS < 365
        store.db.execute("UPDATE step_batches SET created = '2000-01-01T00:00:00.000+00:00'")
        store.record_steps(steps[:1], idempotency_key="other")  # a new key prunes the old ones
        assert [r[0] for r in store.db.execute("SELECT key FROM step_batches")] == ["other"]


def awkward_steps(run_id: str, count: int) -> list[StepRecord]:
    """`count` steps whose text needs escaping on the way in (tabs, newlines, backslashes, quotes, non-ASCII, a
    text that reads `\\N`), with fields left None and exact floats: what COPY's text format must carry unchanged."""
    return [
        StepRecord(
            run_id=run_id,
            step=i,
            action="drive",
            args=("t\t1", "a\\b", "N\u00e9e"),
            outcome="failure" if i % 3 else "success",
            error=None if i % 2 else 'line 1\nline 2 "quoted" \\N',
            duration_ms=None if i % 5 == 0 else i / 7,
            features={"weather": "rain\r\n", "hour": i, "load": 0.1 + i},
            generation=None if i % 4 else i,
            side_effects=None if i % 2 else bool(i % 4),
            expected_effects=["(at t1 b)"] if i % 6 == 0 else None,
            timestamp="2026-01-01T00:00:00Z" if i % 2 else None,
        )  # fmt: skip
        for i in range(count)
    ]


def test_a_large_batch_is_stored_exactly_once_in_order_and_a_resent_one_adds_nothing(store_target):
    """A batch large enough for PostgreSQL's COPY path (`traces.backends.COPY_MIN_ROWS`; SQLite's executemany
    alike) reads back field for field, its step ids in the batch's order; the batch sent again, as after a lost
    answer, adds nothing, with or without an idempotency key; a batch of stored and new steps adds the new ones."""
    from traces.backends import COPY_MIN_ROWS

    count = 3 * COPY_MIN_ROWS
    steps = awkward_steps("big", count)
    with TraceStore(store_target) as store:
        first = store.record_steps(steps, idempotency_key="batch-1")
        assert (first.recorded, first.skipped, first.conflicts) == (count, 0, [])
        assert list(store.iter_steps()) == steps
        ids = [row[0] for row in store.db.execute("SELECT id FROM steps ORDER BY id")]
        stored_order = [row[0] for row in store.db.execute("SELECT step FROM steps ORDER BY id")]
        assert stored_order == list(range(count)) and len(set(ids)) == count
        replayed = store.record_steps(steps, idempotency_key="batch-1")
        assert (replayed.recorded, replayed.replayed) == (count, True)
        again = store.record_steps(steps)
        assert (again.recorded, again.skipped) == (0, count)
        more = awkward_steps("big", count + COPY_MIN_ROWS)
        mixed = store.record_steps(more)
        assert (mixed.recorded, mixed.skipped) == (COPY_MIN_ROWS, count)
        assert store.count_steps() == count + COPY_MIN_ROWS
        assert list(store.iter_steps()) == more


def test_a_large_batchs_provenance_keeps_who_posted_each_step_first(store_target):
    """`note_provenance` of a batch large enough for PostgreSQL's COPY path (through a staging table there, which
    skips the steps already noted), twice in a row and overlapping: each step keeps its first principal."""
    from traces.backends import COPY_MIN_ROWS
    from traces.provenance import note_provenance, provenance

    count = 2 * COPY_MIN_ROWS
    with TraceStore(store_target) as store:
        note_provenance(store, [("run", i) for i in range(count)], "acme", "first")
        note_provenance(store, [("run", i) for i in range(count // 2, count + count // 2)], "acme", "second")
        found = provenance(store, "run")
    assert [row[0] for row in found] == list(range(count + count // 2))
    assert [row[2] for row in found] == ["first"] * count + ["second"] * (count // 2)
