"""The README's learned-cost walkthroughs are output pasted from real runs: re-run every command and compare.

Each ```console block of the sections below is a sequence of `$ command` lines, each followed by what it printed.
The commands run in a scratch folder (with the checkout's `domains/` beside them, so the README's relative paths
work), through bash, with the `portfolio` of this interpreter's environment first on PATH. Timings differ from run
to run, so milliseconds and seconds are masked before comparing; every plan, cost and probability must match.

    python tests/test_readme_examples.py      # re-run the commands and write what they print into README.md
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("## Traces and learned costs", "### Plans that respect the costs")
_TIMING = re.compile(r"\d+(\.\d+)? ms|in \d+(\.\d+)? s\b")


def console_blocks(section: str) -> list[list[tuple[str, list[str]]]]:
    """The console blocks of a README section: [(command, output lines), ...] per block."""
    text = (REPO / "README.md").read_text()
    start = text.index(section + "\n")
    end = text.find("\n#", start + len(section))
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", text[start : end if end > 0 else None], re.S):
        commands: list[tuple[str, list[str]]] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
        blocks.append(commands)
    return blocks


def masked(lines: list[str]) -> list[str]:
    return [_TIMING.sub("<time>", line) for line in lines]


def run_command(command: str, folder: Path) -> tuple[list[str], str]:
    """What `command` prints (stdout lines, with the scratch folder spelled /tmp/ex again) and its stderr."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PORTFOLIO_TRACES", None)
    run = subprocess.run(
        ["bash", "-c", command.replace("/tmp/ex", str(folder / "ex"))],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return run.stdout.replace(str(folder / "ex"), "/tmp/ex").splitlines(), run.stderr


def scratch(folder: Path) -> Path:
    (folder / "domains").symlink_to(REPO / "domains")
    return folder


@pytest.mark.parametrize("section", SECTIONS)
def test_the_readme_walkthrough_prints_what_it_shows(section, tmp_path):
    folder = scratch(tmp_path)
    blocks = console_blocks(section)
    assert blocks, f"no console block under {section!r}"
    for block in blocks:
        for command, shown in block:
            printed, stderr = run_command(command, folder)
            assert masked(printed) == masked(shown), f"$ {command}\n{stderr}"


def regenerate() -> None:
    """Rewrite the console blocks of `SECTIONS` in README.md with what their commands print now."""
    import tempfile

    text = (REPO / "README.md").read_text()
    for section in SECTIONS:
        start = text.index(section + "\n")
        end = text.find("\n#", start + len(section))
        end = len(text) if end < 0 else end
        with tempfile.TemporaryDirectory() as name:
            folder = scratch(Path(name))

            def rerun(match: re.Match) -> str:
                lines = []
                for line in match.group(1).splitlines():
                    if line.startswith("$ "):
                        lines.append(line)
                        lines.extend(run_command(line[2:], folder)[0])
                return "```console\n" + "\n".join(lines) + "\n```"

            body = re.sub(r"```console\n(.*?)```", rerun, text[start:end], flags=re.S)
        text = text[:start] + body + text[end:]
    (REPO / "README.md").write_text(text)


if __name__ == "__main__":
    regenerate()
