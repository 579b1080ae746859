"""A CLI command whose reader goes away (`portfolio costs ... | head`) exits 0 quietly, without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import IPC, REPO

BLOCKS = IPC / "blocks"


def _portfolio(*argv: str) -> list[str]:
    return [sys.executable, "-m", "portfolio.cli", *argv]


@pytest.mark.parametrize(
    "argv",
    [
        ["schema", "task"],
        ["plan", str(BLOCKS / "domain.pddl"), str(BLOCKS / "probBLOCKS-4-0.pddl")],
        ["traces", "export", "--traces", "{db}"],  # catches OSError for its output file: must let EPIPE through
    ],
)
def test_closed_output_pipe_exits_zero_quietly(argv: list[str], tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    db = tmp_path / "traces.db"
    subprocess.run(
        _portfolio("traces", "import", str(REPO / "domains" / "examples" / "steps.jsonl"), "--traces", str(db)),
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    argv = [a.format(db=db) for a in argv]
    process = subprocess.Popen(_portfolio(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the command writes a byte: its first write gets EPIPE
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
