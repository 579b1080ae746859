"""Fault injection on the trace store: the runtime-and-cron loop that lost locks, threads sharing one
connection, writers killed at random points, a full disk, read-only files and directories, an exhausted lock
budget, and a WAL left behind by a killed process. Every fault must leave every committed batch whole and
`PRAGMA integrity_check` "ok". The 200-iteration loop is `benchmarks/experiments/store_soak.py`."""

from __future__ import annotations

import ctypes
import itertools
import os
import random
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.experiments.store_soak import Question, answer, batch, find_person, soak
from traces import CorruptDatabaseError, DatabaseLockedError, DiskFullError, TraceStore, TraceStoreError
from traces.connection import database_key, open_connections

REPO = Path(__file__).resolve().parents[1]

BATCH = 100


def integrity(path: Path) -> str:
    with TraceStore(path) as store:
        return store.db.execute("PRAGMA integrity_check").fetchone()[0]


def run_counts(path: Path, prefix: str) -> dict[str, int]:
    """Run id -> stored steps, for the runs whose id starts with `prefix`."""
    with TraceStore(path) as store:
        sql = "SELECT run_id, count(*) FROM steps WHERE substr(run_id, 1, ?) = ? GROUP BY run_id"
        return dict(store.db.execute(sql, [len(prefix), prefix]).fetchall())


# -- the loop, and sharing inside one process ----------------------------------------------------------


def test_runtime_stores_and_agents_with_cron_imports_and_retrains_lose_nothing(tmp_path: Path) -> None:
    """Fails before the fix: "disk I/O error" from the second iteration on, and rows missing."""
    report = soak(tmp_path / "t.db", iterations=6)
    assert report.errors == []
    assert report.lost == {} and report.integrity == "ok"
    assert sum(report.found.values()) > 6 * BATCH // 5


def test_stores_planners_and_agents_share_one_connection_per_file(tmp_path: Path) -> None:
    from portfolio.agent import Agent

    path = tmp_path / "t.db"
    key = database_key(path)
    first = TraceStore(path)
    second = TraceStore(tmp_path / "." / "t.db")  # another spelling of the same file
    (tmp_path / "link.db").symlink_to(path)
    third = TraceStore(tmp_path / "link.db")
    assert second.db.conn is first.db.conn is third.db.conn and open_connections()[key] == 3
    with Agent([find_person, answer], traces=path, warm=False) as agent:
        assert agent.planner.store.db.conn is agent.store.db.conn is first.db.conn
        assert agent.run(Question("Ada Lovelace")).succeeded
    assert open_connections()[key] == 3
    first.close()
    first.close()  # idempotent: one release per store
    second.close()
    assert open_connections()[key] == 1 and third.count_steps() >= 2
    third.close()
    assert key not in open_connections()
    with pytest.raises(TraceStoreError, match="closed"):
        third.count_steps()


def test_in_memory_stores_are_separate_databases() -> None:
    """ ":memory:" is a new database per SQLite connection: two stores on it must not share one (the learning
    benchmark gives each learned arm its own in-memory store; shared, every arm learned from every arm's steps)."""
    from traces.records import StepRecord

    first, second = TraceStore(":memory:"), TraceStore(":memory:")
    try:
        assert first.db.conn is not second.db.conn
        first.record_steps([StepRecord(run_id="r", step=0, action="drive", args=("a",), outcome="failure")])
        assert first.count_steps() == 1 and second.count_steps() == 0
        assert not any(key.endswith(":memory:") for key in open_connections())
    finally:
        first.close()
        second.close()


def test_the_database_file_is_never_opened_outside_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python open() and close() of the file would drop this process's SQLite locks (see traces.connection)."""
    import builtins
    import io

    notes, good = tmp_path / "notes.db", tmp_path / "t.db"
    notes.write_text("these are my notes\n" * 10)
    real_open = builtins.open

    def guarded(file, *args, **kwargs):
        if str(file).startswith(str(tmp_path)):
            raise AssertionError(f"open({file!r}) outside SQLite")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)
    monkeypatch.setattr(io, "open", guarded)
    with pytest.raises(CorruptDatabaseError, match="notes.db: not an SQLite database"):
        TraceStore(notes)
    with TraceStore(good) as store:
        store.record_steps(batch("r", 3))
    with pytest.raises(CorruptDatabaseError, match="is a directory"):
        TraceStore(tmp_path)


def test_threads_sharing_a_connection_never_undo_each_others_batches(tmp_path: Path) -> None:
    """Before the fix a second thread's BEGIN failed inside the first one's transaction, and its error path
    rolled that transaction back (one request undid another's batch)."""
    path = tmp_path / "t.db"
    stores = [TraceStore(path) for _ in range(3)]
    errors: list[str] = []

    def work(worker: int) -> None:
        store = stores[worker % len(stores)]
        for b in range(25):
            try:
                store.record_steps(batch(f"w{worker}-{b}", 40))
                store.count_steps()
                store.start_run(None, None, run_id=f"run{worker}-{b}")
            except Exception as error:  # collected: the assertion below names them
                errors.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert errors == []
    counts = run_counts(path, "w")
    assert len(counts) == 6 * 25 and set(counts.values()) == {40}
    assert integrity(path) == "ok"


def test_a_transaction_left_open_on_the_connection_is_neither_joined_nor_rolled_back(store_target: str) -> None:
    with TraceStore(store_target) as store:
        store.db.execute("BEGIN")
        store.db.execute("INSERT INTO runs (id) VALUES ('mine')")
        with pytest.raises(TraceStoreError, match="a transaction is already open"):
            store.record_steps(batch("r", 3))
        assert store.db.conn.in_transaction  # still the caller's, with its row
        store.db.execute("COMMIT")
        assert store.get_run("mine") is not None and store.count_steps() == 0


# -- processes killed and starved ------------------------------------------------------------------------------


def forked(child: Callable[[int], None]) -> tuple[int, int]:
    """Run `child(pipe)` in a forked process (imports already loaded: milliseconds, not a Python start-up);
    returns its pid and the read end of the pipe it reports on. This process must hold no connection to the
    file the child uses (SQLite connections do not cross fork)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        code = 0
        try:
            child(write)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def read_all(fd: int, start: bytes = b"") -> list[str]:
    """Every line the child wrote to `fd` (`start`: what was read from it already), once it is closed."""
    chunks = [start]
    while data := os.read(fd, 65536):
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks).decode().split("\n")[:-1]


def read_lines(fd: int, count: int) -> bytes:
    """What the child wrote to `fd` up to its `count`-th line (or its end)."""
    out = b""
    while out.count(b"\n") < count and (data := os.read(fd, 65536)):
        out += data
    return out


def report(pipe: int, line: str) -> None:
    os.write(pipe, (line + "\n").encode())


@pytest.mark.slow
def test_writer_killed_at_random_points_keeps_every_committed_batch(tmp_path: Path) -> None:
    path, rng = tmp_path / "t.db", random.Random(9)
    trials, committed_per_trial = 100, []
    for trial in range(trials):

        def write_forever(pipe: int) -> None:
            store = TraceStore(path)
            for b in itertools.count():
                store.record_steps(batch(f"k{trial}-{b}", BATCH))
                report(pipe, str(b))

        pid, pipe = forked(write_forever)
        # anywhere: opening, migrating, mid-batch, mid-commit; after 0-5 commits were reported, so that the kills
        # land before the first commit and after several however fast this machine is just now
        seen = read_lines(pipe, rng.choice((0, 0, 1, 2, 3, 5)))
        time.sleep(rng.uniform(0.0, 0.01))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        committed = {f"k{trial}-{b}" for b in read_all(pipe, seen)}
        committed_per_trial.append(len(committed))
        found = run_counts(path, f"k{trial}-")
        assert committed <= set(found), f"trial {trial}: committed batches lost"
        assert set(found.values()) <= {BATCH}, f"trial {trial}: a partial batch {found}"
        assert len(set(found) - committed) <= 1  # at most the one committed just before the kill
        if trial % 10 == 9:
            assert integrity(path) == "ok"
    # the kills landed all over: before the first commit (while opening) and after several
    assert min(committed_per_trial) == 0 and max(committed_per_trial) >= 3


def test_full_disk_is_a_clear_error_and_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with TraceStore(path) as store:
        store.record_steps(batch("before", BATCH))

    def fill(pipe: int) -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        store = TraceStore(path)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
        for b in itertools.count():
            try:
                store.record_steps(batch(f"full-{b}", BATCH))
            except TraceStoreError as error:
                report(pipe, f"error {type(error).__name__}: {error}")
                break
            report(pipe, str(b))
        report(pipe, f"still reads {store.count_steps()}")

    pid, pipe = forked(fill)
    _, status = os.waitpid(pid, 0)
    lines = read_all(pipe)
    assert os.waitstatus_to_exitcode(status) == 0, lines
    error = next(line for line in lines if line.startswith("error"))
    assert error.startswith(f"error {DiskFullError.__name__}: {path}") and "file-size limit" in error
    committed = {f"full-{b}" for b in lines if b.isdigit()}
    assert len(committed) >= 3  # it did write until the limit
    assert lines[-1] == f"still reads {BATCH * (len(committed) + 1)}"
    found = run_counts(path, "")
    assert found == {"before": BATCH, **{tag: BATCH for tag in committed}}  # nothing lost, no partial batch
    assert integrity(path) == "ok"


@pytest.mark.serial  # asserts the lock budget (two 50 ms waits) ends the call within 5 s
def test_exhausted_lock_budget_raises_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = TraceStore(path, busy_timeout_ms=50, retries=2, backoff_s=0.01)
    store.record_steps(batch("before", BATCH))
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sqlite3, sys
            conn = sqlite3.connect(sys.argv[1], isolation_level=None)
            conn.execute("BEGIN EXCLUSIVE")
            conn.execute("INSERT INTO runs (id) VALUES ('holder')")
            print("locked", flush=True)
            sys.stdin.read()
            conn.execute("ROLLBACK")
        """), str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        start = time.monotonic()
        with pytest.raises(
            DatabaseLockedError,
            match=r"t\.db: database still locked by another writer after 2 "
            r"retries \(busy_timeout 50 ms each\); nothing from this batch was written",
        ):
            store.record_steps(batch("during", BATCH))
        assert time.monotonic() - start < 5.0
    finally:
        holder.communicate("", timeout=30)
    assert store.count_steps() == BATCH and not store.db.conn.in_transaction
    store.record_steps(batch("after", BATCH))
    assert run_counts(path, "") == {"before": BATCH, "after": BATCH}
    store.close()


def test_wal_left_by_a_killed_writer_is_recovered_on_next_open(tmp_path: Path) -> None:
    path = tmp_path / "t.db"

    def write_then_hang(pipe: int) -> None:
        store = TraceStore(path)
        store.db.execute("PRAGMA wal_autocheckpoint = 0")  # every commit stays in the WAL
        for b in range(5):
            store.record_steps(batch(f"wal-{b}", BATCH))
        report(pipe, "done")
        time.sleep(60)

    pid, pipe = forked(write_then_hang)
    assert os.read(pipe, 5) == b"done\n"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(pipe)
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > 5 * BATCH * 50  # the batches are only in the WAL the dead process left
    assert run_counts(path, "wal-") == {f"wal-{b}": BATCH for b in range(5)}
    assert integrity(path) == "ok"
    assert not wal.exists()  # the last connection closed cleanly: checkpointed and removed


# -- read-only files and directories ---------------------------------------------------------------------------


def _drop_root_override() -> None:
    """In the child: as root, drop the capabilities that ignore file permissions, so modes mean what they say."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH; PR_CAPBSET_DROP = 24
        if libc.prctl(24, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def unprivileged(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120,
        preexec_fn=_drop_root_override, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


OPEN = textwrap.dedent("""
    import sys
    from traces import TraceStore, TraceStoreError
    try:
        TraceStore(sys.argv[1]).close()
        print("opened")
    except TraceStoreError as error:
        print(type(error).__name__, error)
""")


@pytest.fixture
def read_only(tmp_path: Path):
    """A read-only database file in a writable directory, and a read-only directory holding a database."""
    file_case, dir_case = tmp_path / "file", tmp_path / "dir"
    for folder in (file_case, dir_case):
        folder.mkdir()
        with TraceStore(folder / "t.db") as store:
            store.record_steps(batch("r", 5))
    (file_case / "t.db").chmod(0o444)
    dir_case.chmod(0o555)
    yield file_case / "t.db", dir_case
    dir_case.chmod(0o755)


def test_read_only_file_or_directory_is_refused_on_open(read_only: tuple[Path, Path]) -> None:
    ro_file, ro_dir = read_only
    for path, why in [(ro_file, "read-only"), (ro_dir / "t.db", "read-only"), (ro_dir / "new.db", "not writable")]:
        result = unprivileged("-c", OPEN, str(path))
        assert result.stdout.startswith(f"ReadOnlyDatabaseError {path}: "), (result.stdout, result.stderr)
        assert why in result.stdout and result.stderr == ""
    assert run_counts(ro_file, "") == {"r": 5}  # nothing lost, and writable again for a user who may write


def test_read_only_database_on_the_cli_exits_2_without_traceback(read_only: tuple[Path, Path]) -> None:
    ro_file, _ = read_only
    result = unprivileged("-m", "portfolio.cli", "traces", "stats", "--traces", str(ro_file))
    assert result.returncode == 2
    assert f"portfolio: error: {ro_file}: the trace database is read-only" in result.stderr
    assert "Traceback" not in result.stderr
