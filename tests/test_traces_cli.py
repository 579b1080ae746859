"""The `traces` and `retrain` subcommands, called through argparse as the main CLI does."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import pytest

from portfolio.commands import retrain_cmd, traces_cmd

LINE = {"run_id": "r1", "step": 0, "action": "drive", "args": ["t1", "a", "b"], "outcome": "success",
        "duration_ms": 10.0}  # fmt: skip


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="portfolio")
    sub = parser.add_subparsers()
    traces_cmd.register(sub)
    retrain_cmd.register(sub)
    args = parser.parse_args(list(argv))
    return args.func(args)


def write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_import_stats_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "t.db")
    lines = [json.dumps(LINE | {"step": i, "outcome": "failure" if i % 4 == 0 else "success"}) for i in range(8)]
    assert run("traces", "import", write(tmp_path / "in.jsonl", lines), "--traces", db) == 0
    capsys.readouterr()
    assert run("traces", "stats", "--json", "--traces", db) == 0
    [stats] = json.loads(capsys.readouterr().out)
    assert stats == {
        "action": "drive",
        "steps": 8,
        "failures": 2,
        "failure_rate": 0.25,
        "mean_duration_ms": 10.0,
        "mean_success_ms": 10.0,
        "mean_failure_ms": 10.0,
    }
    assert run("traces", "stats", "--traces", db) == 0
    assert "drive" in capsys.readouterr().out
    out = tmp_path / "out.jsonl"
    assert run("traces", "export", "--output", str(out), "--traces", db) == 0
    assert len(out.read_text().splitlines()) == 8


def test_traces_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTFOLIO_TRACES", str(tmp_path / "env.db"))
    assert run("traces", "import", write(tmp_path / "in.jsonl", [json.dumps(LINE)])) == 0
    assert (tmp_path / "env.db").exists()


def test_malformed_jsonl_strict_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "t.db")
    src = write(tmp_path / "in.jsonl", [json.dumps(LINE), '{"run_id": "r1"'])
    assert run("traces", "import", src, "--strict", "--traces", db) == 2
    err = capsys.readouterr().err
    assert "in.jsonl:2: not valid JSON" in err and "Traceback" not in err
    assert run("traces", "stats", "--json", "--traces", db) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing imported


def test_malformed_jsonl_non_strict_partial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "t.db")
    src = write(tmp_path / "in.jsonl", [json.dumps(LINE), json.dumps(LINE | {"step": -1})])
    assert run("traces", "import", src, "--traces", db) == 1
    assert "in.jsonl:2: skipped: step" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["traces", "stats"], ["traces", "export"], ["retrain"]])
def test_non_sqlite_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("not a database\n")
    assert run(*command, "--traces", str(bad)) == 2
    err = capsys.readouterr().err
    assert "notes.db" in err and "not an SQLite database" in err and "Traceback" not in err


def test_newer_schema_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    from traces import TraceStore

    db = tmp_path / "t.db"
    TraceStore(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    assert run("traces", "stats", "--traces", str(db)) == 2
    assert "schema version 99" in capsys.readouterr().err


def test_retrain_prints_version_and_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traces import TraceStore

    db = str(tmp_path / "t.db")
    TraceStore(db).close()  # a store with nothing in it (one that does not exist: the test below)
    assert run("retrain", "--traces", db) == 2
    assert "no steps" in capsys.readouterr().err
    rng = random.Random(0)
    lines = [json.dumps(LINE | {"step": i, "args": ["t1", "a", "b" if i % 2 else "c"],
                                "outcome": "failure" if (i % 2 and rng.random() < 0.8) else "success"})
             for i in range(400)]  # fmt: skip
    assert run("traces", "import", write(tmp_path / "in.jsonl", lines), "--traces", db) == 0
    capsys.readouterr()
    assert run("retrain", "--traces", db, "--json") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["version"] == 1 and info["n_steps"] == 400 and info["metrics"]["brier"] < 0.25
    assert run("retrain", "--traces", db) == 0
    assert "model version 2: 400 steps" in capsys.readouterr().out
    assert run("retrain", "--traces", db, "--prior-mean", "1.5") == 2


def test_backup_and_vacuum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traces import TraceStore

    db, copy = str(tmp_path / "t.db"), tmp_path / "copy.db"
    lines = [json.dumps(LINE | {"step": i}) for i in range(50)]
    assert run("traces", "import", write(tmp_path / "in.jsonl", lines), "--traces", db) == 0
    assert run("traces", "backup", str(copy), "--traces", db) == 0
    assert f"backed up {db} to {copy}" in capsys.readouterr().out
    with TraceStore(copy) as store:
        assert store.count_steps() == 50 and store.db.journal_mode == "wal"
    assert run("traces", "backup", str(copy), "--traces", db) == 2  # never overwrites
    err = capsys.readouterr().err
    assert "copy.db: already exists" in err and "Traceback" not in err
    assert run("traces", "vacuum", "--traces", db) == 0
    assert f"vacuumed {db}:" in capsys.readouterr().out


def test_retrain_keep_prunes_old_model_versions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traces import TraceStore

    db = str(tmp_path / "t.db")
    lines = [json.dumps(LINE | {"step": i, "outcome": "failure" if i % 3 == 0 else "success"}) for i in range(60)]
    assert run("traces", "import", write(tmp_path / "in.jsonl", lines), "--traces", db) == 0
    for _ in range(3):
        assert run("retrain", "--traces", db) == 0
    assert run("retrain", "--traces", db, "--keep", "2") == 0
    assert "pruned 2 old model version(s), kept the newest 2" in capsys.readouterr().out
    with TraceStore(db) as store:
        assert [v for (v,) in store.db.execute("SELECT version FROM models ORDER BY version")] == [3, 4]
    assert run("retrain", "--traces", db, "--keep", "0") == 2
    assert "--keep must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--half-life", "--prior-strength", "--prior-mean"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_retrain_refuses_a_parameter_that_is_not_finite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    """`--half-life nan|inf` and `--prior-strength inf` passed the `<= 0` check and ended in scikit-learn's
    traceback (exit 1); nothing is trained, nothing is lost."""
    db = str(tmp_path / "t.db")
    lines = [json.dumps(LINE | {"step": i, "outcome": "failure" if i % 3 else "success"}) for i in range(30)]
    assert run("traces", "import", write(tmp_path / "in.jsonl", lines), "--traces", db) == 0
    capsys.readouterr()
    assert run("retrain", "--traces", db, option, value) == 2
    assert "finite" in capsys.readouterr().err
    assert run("traces", "stats", "--traces", db) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["drive", "30"]


def test_numbers_sqlite_or_json_cannot_hold_are_bad_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A step number beyond 64 bits was an OverflowError traceback from SQLite that wrote none of the file's
    steps; an infinite duration (1e400) or feature was stored, shown as `inf` by stats and exported as null."""
    db = str(tmp_path / "t.db")
    assert run("traces", "import", write(tmp_path / "ok.jsonl", [json.dumps(LINE)]), "--traces", db) == 0
    lines = [
        json.dumps(LINE | {"step": 1}),
        json.dumps(LINE | {"step": 2**64}),
        json.dumps(LINE | {"step": 3, "generation": 2**64}),
        '{"run_id": "r1", "step": 4, "action": "drive", "outcome": "success", "duration_ms": 1e400}',
        '{"run_id": "r1", "step": 5, "action": "drive", "outcome": "success", "features": {"load": 1e400}}',
    ]
    capsys.readouterr()
    assert run("traces", "import", write(tmp_path / "bad.jsonl", lines), "--traces", db) == 1
    err = capsys.readouterr().err
    for line, field in ((2, "step"), (3, "generation"), (4, "duration_ms"), (5, "features.load")):
        assert f"bad.jsonl:{line}: skipped: {field}" in err, err
    assert run("traces", "export", "--traces", db) == 0
    assert [json.loads(x)["step"] for x in capsys.readouterr().out.splitlines()] == [0, 1]


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_export_onto_the_store_itself_is_refused_and_the_store_survives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    """`traces export -o traces.db --traces traces.db` used to replace the database (models, runs and all) with
    a JSONL file of its steps."""
    db = str(tmp_path / "t.db")
    assert run("traces", "import", write(tmp_path / "in.jsonl", [json.dumps(LINE)]), "--traces", db) == 0
    capsys.readouterr()
    assert run("traces", "export", "--traces", db, "-o", db + suffix) == 2
    assert "is the trace database itself" in capsys.readouterr().err
    assert run("traces", "stats", "--traces", db) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["drive", "1"]


def test_importing_the_store_itself_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`traces import traces.db --traces traces.db` read the live database with a plain open(), whose close
    drops the process's SQLite locks (traces/connection.py), and then called it not UTF-8 text."""
    db = str(tmp_path / "t.db")
    assert run("traces", "import", write(tmp_path / "in.jsonl", [json.dumps(LINE)]), "--traces", db) == 0
    capsys.readouterr()
    assert run("traces", "import", db, "--traces", db) == 2
    assert "is the trace database itself; expected a JSONL or CSV file" in capsys.readouterr().err


def test_a_file_that_cannot_be_read_is_named_without_a_line_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A missing file was `1 bad line(s) in steps.jsonl, 0 step(s) imported: steps.jsonl:0: cannot read the file
    (No such file or directory). Each line must be one JSON object ...`: no line of it was read, let alone bad."""
    missing = str(tmp_path / "steps.jsonl")
    assert run("traces", "import", missing, "--traces", str(tmp_path / "t.db")) == 2
    err = capsys.readouterr().err
    assert f"portfolio: error: {missing}: cannot read the file (No such file or directory); nothing imported." in err
    assert ":0:" not in err and "bad line" not in err


@pytest.mark.parametrize("command", [["traces", "stats"], ["traces", "export"], ["traces", "vacuum"], ["retrain"]])
def test_a_store_that_does_not_exist_is_exit_2_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """`traces stats --traces typo.db` created an empty database and said "no steps in typo.db", exit 0."""
    typo = tmp_path / "typo.db"
    assert run(*command, "--traces", str(typo)) == 2
    err = capsys.readouterr().err
    assert "typo.db" in err and "no trace store there" in err and "Traceback" not in err
    assert not typo.exists()


def test_a_file_with_a_byte_order_mark_imports_from_its_first_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSONL file saved with a UTF-8 byte-order mark had its first line refused as "not valid JSON"."""
    path = tmp_path / "bom.jsonl"
    path.write_text("\n".join(json.dumps(LINE | {"step": i}) for i in range(2)) + "\n", encoding="utf-8-sig")
    assert run("traces", "import", str(path), "--traces", str(tmp_path / "t.db")) == 0
    assert "imported 2 step(s)" in capsys.readouterr().out


def test_a_csv_file_of_steps_imports_like_jsonl_with_bad_rows_named_by_line(tmp_path: Path, capsys):
    """A spreadsheet's export: plan spelling or name and args, JSON features, an extra column as a feature, an
    empty cell as a field left out; a bad row is skipped and named by its line (a quoted line break counted)."""
    from traces.jsonl import iter_jsonl
    from traces.records import StepRecord
    from traces.store import TraceStore

    csv_file = tmp_path / "steps.csv"
    csv_file.write_text(
        "run_id,step,action,args,outcome,duration_ms,weather,features,error\n"
        "r1,0,(drive t1 a b),,success,1200,rain,,\n"
        'r1,1,unload,t1 b,failure,,,"{""load"": 3}","line one\nline two"\n'
        "r1,2,,,success,,,,\n"
        "r1,3,(drive t1 b a),,maybe,,,,\n"
    )
    db = str(tmp_path / "t.db")
    assert run("traces", "import", str(csv_file), "--traces", db) == 1
    err = capsys.readouterr().err
    assert f"{csv_file}:5: skipped: action: Field required" in err
    assert f"{csv_file}:6: skipped: outcome: Input should be 'success', 'failure' or 'replan'" in err
    with TraceStore(db) as store:
        steps = {s.step: s for s in map(StepRecord.model_validate_json, iter_jsonl(store))}
    assert steps[0].action == "drive" and steps[0].args == ("t1", "a", "b") and steps[0].duration_ms == 1200
    assert steps[0].features == {"weather": "rain"}
    assert steps[1].args == ("t1", "b") and steps[1].features == {"load": 3} and steps[1].error == "line one\nline two"
    assert run("traces", "import", str(csv_file), "--traces", db, "--strict") == 2  # bad rows: nothing written


def test_a_csv_file_without_the_columns_a_step_needs_is_refused(tmp_path: Path, capsys):
    csv_file = tmp_path / "steps.csv"
    csv_file.write_text("run,step,act\nr1,0,(drive t1 a b)\n")
    assert run("traces", "import", str(csv_file), "--traces", str(tmp_path / "t.db")) == 2
    assert "the header lacks action, run_id" in capsys.readouterr().err
