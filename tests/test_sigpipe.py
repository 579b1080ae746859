"""A CLI command whose reader goes away (`portfolio costs ... | head`) exits 0 quietly, without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLOCKS = REPO.parent / "shared" / "ipc" / "blocks"


@pytest.mark.parametrize("argv", [
    ["schema", "task"],
    ["plan", str(BLOCKS / "domain.pddl"), str(BLOCKS / "probBLOCKS-4-0.pddl")],
])
def test_closed_output_pipe_exits_zero_quietly(argv: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen([sys.executable, "-m", "portfolio.cli", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the command writes a byte: its first write gets EPIPE
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
