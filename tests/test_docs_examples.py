"""The docs' walkthroughs (docs/*.md: the learned-cost loop, the agent runtimes' examples) are output of real
runs: re-run every command and compare, so a stale example fails the build.

Each ```console block of the sections below is a sequence of `$ command` lines, each followed by what it printed.
The commands run in a scratch folder (with the checkout's `domains/` and `examples/` beside them, so the docs'
relative paths work), through bash, with the `portfolio` of this interpreter's environment first on PATH. Timings
differ from run to run, so milliseconds and seconds are masked before comparing; every plan, cost and probability
must match.

    python tests/test_docs_examples.py      # re-run the commands and write what they print into the pages
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# (page, heading): the console blocks from the heading to the next heading of any level
SECTIONS = (
    ("docs/traces.md", "# Traces and learned costs"),
    ("docs/traces.md", "## Plans that respect the costs"),
    ("docs/runtimes.md", "## LangGraph"),
    ("docs/runtimes.md", "## pydantic-ai"),
    ("docs/runtimes.md", "## Any MCP client"),
)
_TIMING = re.compile(r"\d+(\.\d+)? ms|in \d+(\.\d+)? s\b")


def section_span(text: str, heading: str) -> tuple[int, int]:
    """Where the section under `heading` starts and ends in a page's text (a heading is a line of its own)."""
    start = 0 if text.startswith(heading + "\n") else text.index("\n" + heading + "\n") + 1
    end = text.find("\n#", start + len(heading))
    return start, len(text) if end < 0 else end


def console_blocks(page: str, heading: str) -> list[list[tuple[str, list[str]]]]:
    """The console blocks of a section of a docs page: [(command, output lines), ...] per block."""
    text = (REPO / page).read_text()
    start, end = section_span(text, heading)
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", text[start:end], re.S):
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
    for name in ("domains", "examples"):
        (folder / name).symlink_to(REPO / name)
    return folder


@pytest.mark.parametrize(("page", "heading"), SECTIONS, ids=[f"{p}:{h.lstrip('# ')}" for p, h in SECTIONS])
def test_the_docs_walkthrough_prints_what_it_shows(page, heading, tmp_path):
    folder = scratch(tmp_path)
    blocks = console_blocks(page, heading)
    assert blocks, f"no console block under {heading!r} in {page}"
    for block in blocks:
        for command, shown in block:
            printed, stderr = run_command(command, folder)
            assert masked(printed) == masked(shown), f"$ {command}\n{stderr}"


def regenerate() -> None:
    """Rewrite the console blocks of `SECTIONS` in their pages with what their commands print now."""
    import tempfile

    for page, heading in SECTIONS:
        text = (REPO / page).read_text()
        start, end = section_span(text, heading)
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
        (REPO / page).write_text(text[:start] + body + text[end:])


if __name__ == "__main__":
    regenerate()
