"""The PDDL reader and writer on the IPC domains in tests/data/ipc (three problems of each of the 13). Bad input,
one test per kind: `tests/test_pddl_errors.py`."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from support import IPC

from domains.load import load_task
from domains.model import FunctionTerm
from domains.pddl import parse_problem, parse_task
from domains.pddl_writer import domain_to_pddl, replace_init, task_with_texts

DOMAINS = sorted(p.name for p in IPC.iterdir() if p.is_dir())


def problems(domain: str, count: int = 3) -> list[Path]:
    return sorted(p for p in (IPC / domain).glob("*.pddl") if p.name != "domain.pddl")[:count]


def cases() -> list[tuple[str, Path]]:
    return [(d, p) for d in DOMAINS for p in problems(d)]


def _section(text: str, key: str) -> str:
    """The text of a top-level `(key ...)` section, found by counting parentheses (independent of the parser)."""
    text = re.sub(r";[^\n]*", "", text.lower())
    start = text.index("(" + key)
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1 + len(key) : i]
    raise AssertionError("unbalanced")


def _count_objects(text: str) -> int:
    tokens = _section(text, ":objects").split()
    return sum(1 for i, t in enumerate(tokens) if t != "-" and (i == 0 or tokens[i - 1] != "-"))


def _count_init(text: str) -> tuple[int, int]:
    """(atoms, numeric facts) in :init: top-level lists, numeric ones start with '(='."""
    body, depth, atoms, numeric = _section(text, ":init"), 0, 0, 0
    for i, ch in enumerate(body):
        if ch == "(":
            if depth == 0:
                if body[i + 1 :].lstrip().startswith("="):
                    numeric += 1
                else:
                    atoms += 1
            depth += 1
        elif ch == ")":
            depth -= 1
    return atoms, numeric


@pytest.mark.parametrize("domain,problem", cases(), ids=lambda v: getattr(v, "name", v))
def test_ipc_problem_parses_with_counts_matching_the_text(domain: str, problem: Path) -> None:
    task = load_task(IPC / domain / "domain.pddl", problem)
    text = problem.read_text()
    assert len(task.problem.objects) == _count_objects(text)
    atoms, numeric = _count_init(text)
    assert len(task.problem.init) == atoms  # IPC files list no duplicate facts
    assert len(task.problem.numeric_init) == numeric
    assert task.problem.domain_name == task.domain.name
    assert task.problem_pddl == text and task.domain_pddl == (IPC / domain / "domain.pddl").read_text()
    assert task.domain.actions and task.problem.goal.parts  # type: ignore[union-attr]


def test_every_domain_has_at_least_three_problems_covered() -> None:
    assert len(DOMAINS) == 13
    assert all(len(problems(d)) == 3 for d in DOMAINS)


def test_costs_are_read_from_constants_and_functions() -> None:
    barman = load_task(IPC / "barman-sat11-strips" / "domain.pddl", problems("barman-sat11-strips")[0])
    assert {a.cost for a in barman.domain.actions} == {1.0, 10.0}
    assert barman.problem.minimize_total_cost
    transport = load_task(IPC / "transport-sat08-strips" / "domain.pddl", problems("transport-sat08-strips")[0])
    drive = transport.domain.action("drive")
    assert drive is not None and drive.cost == FunctionTerm("road-length", ("?l1", "?l2"))
    lengths = dict(transport.problem.numeric_init)
    assert lengths[FunctionTerm("total-cost")] == 0.0
    assert sum(1 for t in lengths if t.name == "road-length") == _section(
        problems("transport-sat08-strips")[0].read_text(), ":init"
    ).count("road-length")
    blocks = load_task(IPC / "blocks" / "domain.pddl", problems("blocks")[0])
    assert not blocks.has_action_costs() and not blocks.problem.minimize_total_cost


def test_logistics_repeated_predicate_variable_is_accepted_and_written_distinct() -> None:
    task = load_task(IPC / "logistics00" / "domain.pddl", problems("logistics00")[0])
    declared = task.domain.predicate("in")
    assert declared is not None and declared.arity == 2
    assert len({p.name for p in declared.parameters}) == 2
    text = domain_to_pddl(task.domain)
    match = re.search(r"\(in (\?\S+) (\?\S+)\)", text)
    assert match and match.group(1) != match.group(2)


def _fast_downward_accepts(domain_text: str, problem_text: str, translate: bool) -> int:
    from fast_downward.translate import normalize, options

    options.set_options(["d", "p"])
    from fast_downward.translate import main as translator
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    fd_task = parsing_functions.parse_task(
        lisp_parser.parse_nested_list(io.StringIO(domain_text)),
        lisp_parser.parse_nested_list(io.StringIO(problem_text)),
    )
    normalize.normalize(fd_task)
    if not translate:
        return len(fd_task.actions)
    return len(translator.pddl_to_sas(fd_task).operators)


@pytest.mark.parametrize("domain,problem", cases(), ids=lambda v: getattr(v, "name", v))
def test_writer_round_trips_and_fast_downward_translates_it(domain: str, problem: Path) -> None:
    task = load_task(IPC / domain / "domain.pddl", problem)
    written = task_with_texts(task.domain, task.problem)
    again = parse_task(written.domain_pddl, written.problem_pddl, "written-domain", "written-problem")
    assert again == task
    assert again.domain == task.domain and again.problem == task.problem
    # parking's translation takes seconds (grounding), so only its parsing and normalising are checked
    operators = _fast_downward_accepts(
        written.domain_pddl, written.problem_pddl, translate=domain != "parking-sat11-strips"
    )
    assert operators > 0


def test_replace_init_changes_problem_text_and_fingerprint_only() -> None:
    task = load_task(IPC / "blocks" / "domain.pddl", problems("blocks")[0])
    atom = next(iter(sorted(task.problem.init)))
    smaller = replace_init(task, task.problem.init - {atom})
    assert smaller.problem.init == task.problem.init - {atom}
    assert smaller.domain_pddl == task.domain_pddl
    assert smaller.fingerprint != task.fingerprint
    assert parse_problem(smaller.problem_pddl, task.domain) == smaller.problem
    assert str(atom) not in smaller.problem_pddl
    assert replace_init(task, task.problem.init).fingerprint == replace_init(task, set(task.problem.init)).fingerprint


# --- bad input: type, file, line ---------------------------------------------------------------------------
