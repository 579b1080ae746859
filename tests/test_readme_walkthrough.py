"""The README's learned-cost walkthrough shows what the commands print today (issue 25, point 8: it showed the
costs and plan of a model two versions old). Every command of the block is run as written (in a scratch folder,
with the repository's example steps); each line of its output must match the README's, except the times."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from conftest import REPO

FIRST = "$ portfolio traces import domains/examples/steps.jsonl --traces traces.db\n"
TIMES = re.compile(r"\d+\.\d+ ms|trained in \d+\.\d+ s")


def walkthrough() -> list[tuple[str, list[str]]]:
    text = (REPO / "README.md").read_text()
    block = text[text.index(FIRST):]
    block = block[:block.index("```")]
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    return commands


def test_the_learned_cost_walkthrough_prints_what_the_readme_shows(tmp_path):
    (tmp_path / "domains" / "examples").mkdir(parents=True)
    shutil.copy(REPO / "domains" / "examples" / "steps.jsonl", tmp_path / "domains" / "examples")
    out = tmp_path / "ex"
    for command, shown in walkthrough():
        command = command.replace("/tmp/ex", str(out)).replace("portfolio ", f"{sys.executable} -m portfolio.cli ", 1)
        run = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert run.returncode == 0, (command, run.stderr)
        printed = [TIMES.sub("<t>", line.replace(str(out), "/tmp/ex")) for line in run.stdout.splitlines()]
        assert printed == [TIMES.sub("<t>", line) for line in shown], command
