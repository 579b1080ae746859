"""The docs' walkthroughs (docs/*.md: the learned-cost loop, the agent runtimes' examples) are output of real
runs: re-run every command and compare, so a stale example fails the build.

Each ```console block of the sections below is a sequence of `$ command` lines, each followed by what it printed.
The commands run in a scratch folder (with the checkout's `domains/`, `examples/` and `tests/` beside them, so the
docs' relative paths work, `tests/data/ipc/...` among them), through bash, with the `portfolio` of this
interpreter's environment first on PATH. Timings differ from run to run, so milliseconds and seconds are masked
before comparing; every plan, cost and probability must match.

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
    ("README.md", "## A first plan"),
    ("docs/cli.md", "# Plan from the command line"),
    ("docs/cli.md", "## Statuses, exit codes and bad input"),
    ("docs/cli.md", "## Unsolvable, and why"),
    ("docs/cli.md", "## Why learned costs changed the plan"),
    ("docs/traces.md", "# Traces and learned costs"),
    ("docs/traces.md", "## Plans that respect the costs"),
    ("docs/learning.md", "## A tool that broke, then was left alone"),
    ("docs/runtimes.md", "## LangGraph"),
    ("docs/runtimes.md", "## pydantic-ai"),
    ("docs/runtimes.md", "## Any MCP client"),
    ("docs/unified-planning.md", "# From unified-planning"),
    ("docs/unified-planning.md", "## A plan now, a cheaper one later"),
    ("docs/unified-planning.md", "## Replanning as the problem changes"),
)
_TIMING = re.compile(r"\d+(\.\d+)? ms|in \d+(\.\d+)? s\b")
# --json: timings, and which of the searches raced on a unit-cost task answered first (on blocks-4, either)
_MASKS = (
    (_TIMING, "<time>"),
    (re.compile(r'("\w+_ms": )\d+(\.\d+)?'), r"\1<time>"),
    (re.compile(r'"(plan found|stopped: [\w-]+ found a plan first)"'), '"<race>"'),
    (re.compile(r'("search": )"[\w-]+"'), r'\1"<race>"'),
    # which of Fast Downward's paths answered a small task with costs: the in-process A* when it finishes within
    # its 20 ms (`portfolio.delegates.fast_downward.inprocess`), else the search processes; machine load decides
    (re.compile(r"\b(fd-inprocess|fast-downward)\b"), "<fast-downward>"),
)


def section_span(text: str, heading: str) -> tuple[int, int]:
    """Where the section under `heading` starts and ends in a page's text (a heading is a line of its own)."""
    start = 0 if text.startswith(heading + "\n") else text.index("\n" + heading + "\n") + 1
    end = text.find("\n#", start + len(heading))
    return start, len(text) if end < 0 else end


NOT_RERUN = "<!-- not re-run: "  # the line before such a block: a reason a reader can check


def marked_not_rerun(text: str, position: int) -> bool:
    """Whether the line before `position` (where a console block starts) says why the block is not re-run."""
    return text[:position].rstrip("\n").rsplit("\n", 1)[-1].startswith(NOT_RERUN)


def unchecked_blocks() -> list[str]:
    """The console blocks of README.md and docs/*.md that no section above re-runs and that do not say why."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = []
    for path in pages:
        text = path.read_text()
        page = str(path.relative_to(REPO))
        spans = [section_span(text, heading) for name, heading in SECTIONS if name == page]
        for match in re.finditer(r"```console\n", text):
            where = match.start()
            if marked_not_rerun(text, where) or any(start <= where < end for start, end in spans):
                continue
            found.append(f"{page}:{text.count(chr(10), 0, where) + 1}")
    return found


def test_every_console_example_is_re_run_or_says_why_not():
    """A console block outside the re-run sections is either added to SECTIONS or marked, on the line before it,
    with `<!-- not re-run: REASON -->`: none goes stale unnoticed."""
    assert unchecked_blocks() == []


def console_blocks(page: str, heading: str) -> list[list[tuple[str, list[str]]]]:
    """The console blocks of a section of a docs page: [(command, output lines), ...] per block."""
    text = (REPO / page).read_text()
    start, end = section_span(text, heading)
    blocks = []
    for match in re.finditer(r"```console\n(.*?)```", text[start:end], re.S):
        if marked_not_rerun(text, start + match.start()):
            continue
        body = match.group(1)
        commands: list[tuple[str, list[str]]] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
        blocks.append(commands)
    return blocks


def masked(lines: list[str]) -> list[str]:
    for pattern, replacement in _MASKS:
        lines = [pattern.sub(replacement, line) for line in lines]
    return lines


def run_command(command: str, folder: Path, status: int = 0) -> tuple[list[str], int]:
    """What `command` prints on the terminal, stdout and stderr as they come (with the scratch folder spelled
    /tmp/ex again), and its exit status; `status` is the one before, for a command that reads `$?`. A translation
    cache of the folder's own, so that what `--json` says of it depends only on the commands before it."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(folder / "cache"),
    }
    env.pop("PORTFOLIO_TRACES", None)
    run = subprocess.run(
        ["bash", "-c", f"(exit {status}); " + command.replace("/tmp/ex", str(folder / "ex"))],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    printed = run.stdout.replace(str(folder / "ex"), "/tmp/ex")
    return printed.splitlines(), run.returncode


def scratch(folder: Path) -> Path:
    for name in ("domains", "examples", "tests"):
        (folder / name).symlink_to(REPO / name)
    return folder


@pytest.mark.parametrize(("page", "heading"), SECTIONS, ids=[f"{p}:{h.lstrip('# ')}" for p, h in SECTIONS])
def test_the_docs_walkthrough_prints_what_it_shows(page, heading, tmp_path):
    folder = scratch(tmp_path)
    blocks = console_blocks(page, heading)
    assert blocks, f"no console block under {heading!r} in {page}"
    for block in blocks:
        status = 0
        for command, shown in block:
            printed, status = run_command(command, folder, status)
            assert masked(printed) == masked(shown), f"$ {command}"


def regenerate() -> None:
    """Rewrite the console blocks of `SECTIONS` in their pages with what their commands print now."""
    import tempfile

    for page, heading in SECTIONS:
        text = (REPO / page).read_text()
        start, end = section_span(text, heading)
        with tempfile.TemporaryDirectory() as name:
            folder = scratch(Path(name))

            def rerun(match: re.Match) -> str:
                if marked_not_rerun(match.string, match.start()):
                    return match.group(0)
                lines, status = [], 0
                for line in match.group(1).splitlines():
                    if line.startswith("$ "):
                        printed, status = run_command(line[2:], folder, status)
                        lines.extend([line, *printed])
                return "```console\n" + "\n".join(lines) + "\n```"

            body = re.sub(r"```console\n(.*?)```", rerun, text[start:end], flags=re.S)
        (REPO / page).write_text(text[:start] + body + text[end:])


if __name__ == "__main__":
    regenerate()
