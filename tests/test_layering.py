"""The map the code follows, enforced: imports point one way and no module imports itself round a cycle.

- `domains` and `traces` import no other package of the project; `learning` only those two;
- the engine (`portfolio.engine`) imports nothing of `portfolio` outside itself: not the delegates, the Planner,
  the service, the agents, the commands, the benchmarks or the CLI; of the rest, `domains` and the schema of
  an attempt's details (`traces.attempt_details`, which its `Attempt` and `DelegateOutcome` carry);
- the delegates import neither the Planner nor anything built on it;
- no import cycle between modules, benchmarks included, counting imports inside functions and under
  `TYPE_CHECKING` (a cycle hidden in a function is still a cycle in the design).

The import graph is read from the source with `ast` (no module is imported)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from domains.graphs import strongly_connected_components

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("portfolio", "domains", "learning", "traces", "benchmarks")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for all the checks below (the source does not change during a run:
    parsing the tree once per check took about 1 s each, 2-4 s on a loaded machine)."""
    return ast.parse(path.read_text(), str(path))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (`from pkg import sub` counts as importing `pkg.sub`)."""

    def known(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found.update(t for t in map(known, targets) if t is not None and t != name)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """The project's import graph, read once (the checks only read it)."""
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module."""
    components = strongly_connected_components(sorted(edges), lambda module: sorted(edges[module]))
    return [sorted(component) for component in components if len(component) > 1]


def _breaks(edges: dict[str, set[str]], layer: str, allowed) -> list[str]:
    return sorted(
        f"{module} -> {target}"
        for module, targets in edges.items()
        if module == layer or module.startswith(layer + ".")
        for target in targets
        if not allowed(target)
    )


def _within(*prefixes: str):
    return lambda target: any(target == p or target.startswith(p + ".") for p in prefixes)


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_domains_and_traces_import_no_other_package_and_learning_only_those_two():
    edges = graph()
    assert _breaks(edges, "domains", _within("domains")) == []
    assert _breaks(edges, "traces", _within("traces")) == []
    assert _breaks(edges, "learning", _within("learning", "domains", "traces")) == []


def test_the_engine_imports_nothing_built_on_it():
    assert _breaks(graph(), "portfolio.engine", _within("portfolio.engine", "domains", "traces.attempt_details")) == []


def test_the_delegates_import_neither_the_planner_nor_what_is_built_on_it():
    built_on = _within(
        "portfolio.planner",
        "portfolio.serve",
        "portfolio.agent",
        "portfolio.commands",
        "portfolio.benchsuite",
        "portfolio.cli",
        "benchmarks",
    )
    assert _breaks(graph(), "portfolio.delegates", lambda target: not built_on(target)) == []


def test_the_checker_sees_a_cycle_and_a_layer_break():
    """The checks above could pass by reading nothing: on a made-up graph they must find both."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "domains.x": {"portfolio.y"}, "portfolio.y": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert _breaks(edges, "domains", _within("domains")) == ["domains.x -> portfolio.y"]
    assert len(graph()) > 100 and "portfolio.engine.cascade" in graph()["portfolio.planner"]


def test_every_name_imported_from_a_project_module_exists():
    """`from portfolio.x import name` anywhere in the tree (tests, benchmarks, examples) names something that
    module has: a linter's autofix once dropped re-exports a test imported, and only collection failed."""
    import importlib

    missing = []
    folders = (*PACKAGES, "tests", "examples")
    for path in (p for folder in folders for p in (ROOT / folder).rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            if node.module.split(".")[0] not in PACKAGES:
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if alias.name != "*" and not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{alias.name}")
    assert missing == []
