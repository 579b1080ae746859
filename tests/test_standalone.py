"""A fresh clone stands alone: no test module, and no example of the README or the docs, reads the IPC sets that
sit beside the clone on the development machines and CI (`../shared`); the tests read the few tasks committed
under tests/data instead, which stays small. Only the benchmarks (`benchmarks/`, `make bench`, and
docs/benchmarks.md, which reports their runs) read the full sets, by path. `.ci/run` proves it by running the
suite with `../shared` hidden; these tests keep a path to it from coming back on a machine where it is there."""

from __future__ import annotations

import re
from pathlib import Path

from support import DATA, REPO

# `../shared`, or a path that joins a part named "shared" (`REPO.parent / "shared"`, `Path("..", "shared")`)
BESIDE = re.compile(r"""\.\./shared\b|/\s*["']shared["']|["']\.\.["']\s*,\s*["']shared["']""")
# docs/benchmarks.md reports the benchmarks' runs on the full sets, and says where they come from
BENCHMARK_PAGES = {"docs/benchmarks.md"}
DATA_LIMIT_BYTES = 2 * 1024 * 1024


def beside_the_clone(paths: list[Path]) -> list[str]:
    """`file:line: text` of every line of `paths` that names a path beside the clone."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if BESIDE.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    return found


def test_the_pattern_finds_each_spelling_of_a_path_beside_the_clone():
    spellings = ['"../shared/ipc"', 'REPO.parent / "shared" / "ipc"', "parents[2] / 'shared'", 'Path("..", "shared")']
    assert all(BESIDE.search(text) for text in spellings)
    assert not any(BESIDE.search(text) for text in ['cache.put("shared", entry)', "a shared planner", "mcp.shared"])


def test_no_test_module_reads_beside_the_clone():
    # this module spells the pattern out, and nothing else
    modules = [path for path in sorted((REPO / "tests").rglob("*.py")) if path != Path(__file__).resolve()]
    assert REPO / "tests" / "support.py" in modules and REPO / "tests" / "conftest.py" in modules
    assert beside_the_clone(modules) == []


def test_readme_and_docs_examples_read_nothing_beside_the_clone():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    checked = [page for page in pages if str(page.relative_to(REPO)) not in BENCHMARK_PAGES]
    assert len(checked) == len(pages) - len(BENCHMARK_PAGES)
    assert beside_the_clone(checked) == []


def test_the_committed_test_data_stays_small():
    files = [path for path in DATA.rglob("*") if path.is_file()]
    assert sum(path.stat().st_size for path in files) <= DATA_LIMIT_BYTES
    for folder in ("ipc", "ipc-more", "ippc"):
        assert (DATA / folder / "README.md").is_file(), f"tests/data/{folder} says which files it holds and why"
