"""`portfolio bench learning`: the learned-costs benchmark over generated worlds, through the CLI as a user runs it
(the package's copy, so an installed `portfolio` can run it), and its checks on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import portfolio

from portfolio.benchsuite.worlds.family import KINDS
from portfolio.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_one_small_world_end_to_end_writes_its_report(tmp_path, capsys):
    code = main(
        [
            "bench",
            "learning",
            "--kinds",
            "object",
            "--seeds",
            "1",
            "--episodes",
            "30",
            "--retrain-every",
            "10",
            "--policies",
            "cautious,ucb",  # an old name still works: ucb runs as optimistic
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    report = (tmp_path / "learning-worlds.md").read_text()
    assert "| object | 1 | cautious |" in report and "| object | 1 | optimistic |" in report and report in out.out
    data = json.loads((tmp_path / "learning-worlds.json").read_text())
    (run,) = data["runs"]
    assert run["world"] == "object-200" and run["episodes"] == 30  # held-out seeds by default
    assert set(run["success"]) == {"cost-blind", "learned-cautious", "learned-optimistic", "oracle"}
    assert all(len(s) == 30 for s in run["success"].values())
    # retrained three times: a model to calibrate, whose predicted p_fail is near the world's truth (0.09 when
    # written); 0 would be a model compared with itself
    assert 0.0 < run["calibration"]["cautious"]["mae"] < 0.3, run["calibration"]
    assert (tmp_path / "learning-worlds.png").read_bytes()[:4] == b"\x89PNG"
    assert "object-200:" in out.err  # a line per finished world
    assert "| object | cautious | 20 |" in report  # plan quality of calls with learned costs (after the 1st retrain)
    assert all(
        key.split("/")[0] in ("fast-downward", "fd-inprocess", "pyperplan")
        for key in run["searches"]["learned-cautious"]
    )
    assert set(run["searches"]["oracle"]) == {"route-search"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--kinds", "pairs,nope"], "unknown world type 'nope'"),
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--seeds", "-3"], "--seeds must be >= 1"),
        (["--episodes", "0"], "--episodes must be >= 1"),
        (["--policies", "greedy"], "unknown explore policy 'greedy'"),
        (["--jobs", "0"], "--jobs must be >= 1"),
        (["--first-seed", "-1"], "--first-seed must be >= 0"),
        (["--bundled-episodes", "-1"], "--bundled-episodes must be >= 0"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, argv, message):
    assert main(["bench", "learning", *argv, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_the_checkout_command_is_the_same_command():
    """`python -m benchmarks.experiments.learning_worlds` (cited in notes) is a thin wrapper: same flags, same
    checks."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.experiments.learning_worlds", "--kinds", "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "unknown world type 'nope'" in done.stderr and "Traceback" not in done.stderr
    help_text = portfolio("bench", "learning", "--help").stdout
    for taught in (
        "held out",
        "tuning",
        "--jobs",
        "thompson",
        "learning-worlds.png",
        "van-a",
        *KINDS,  # every world type
        "6000-6019",  # the changing types: which seeds measured the kept version
        "learning-worlds-reliability.png",
        "default cascade",
        "seq-opt-lmcut",
        "Speed:",
        "seconds per world",
    ):
        assert taught in help_text
