"""The PDDL reader and writer on the IPC domains in ../shared/ipc, and one test per kind of bad input."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from domains.errors import ArityError, PDDLSyntaxError, TaskInputError, UndefinedSymbolError, UnsupportedFeatureError
from domains.load import load_task
from domains.model import Atom, FunctionTerm
from domains.pddl import parse_problem, parse_task
from domains.pddl_domain import parse_domain
from domains.pddl_writer import domain_to_pddl, replace_init, task_with_texts

IPC = Path(__file__).resolve().parents[1].parent / "shared" / "ipc"
DOMAINS = sorted(p.name for p in IPC.iterdir() if p.is_dir()) if IPC.is_dir() else []
pytestmark = pytest.mark.skipif(not DOMAINS, reason="../shared/ipc not available")


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

DOMAIN = """(define (domain d)
  (:requirements :strips :typing)
  (:types block - object)
  (:predicates (on ?x ?y - block) (clear ?x - block))
  (:action move
    :parameters (?x ?y - block)
    :precondition (and (clear ?x) (clear ?y))
    :effect (and (on ?x ?y) (not (clear ?y)))))
"""
PROBLEM = """(define (problem p)
  (:domain d)
  (:objects a b - block)
  (:init (clear a)
         (clear b))
  (:goal (on a b)))
"""


def _error(cls: type, domain: str = DOMAIN, problem: str | None = None) -> Exception:
    with pytest.raises(cls) as info:
        if problem is None:
            parse_domain(domain, "dom.pddl")
        else:
            parse_task(domain, problem, "dom.pddl", "prob.pddl")
    return info.value


def test_valid_inline_task_parses() -> None:
    task = parse_task(DOMAIN, PROBLEM)
    assert task.problem.init == {Atom("clear", ("a",)), Atom("clear", ("b",))}


@pytest.mark.parametrize(
    "old,new,line",
    [
        ("(clear ?x) (clear ?y))", "(clear ?x) (clear ?y)", 7),  # the precondition's (and swallows :effect
        ("(clear ?x - block))", "(clear ?x - block)", 4),  # (:predicates swallows the action
        ("(not (clear ?y)))))", "(not (clear ?y))))", 1),  # nothing follows: only (define is known open
    ],
)
def test_unclosed_paren_says_where_it_opened(old: str, new: str, line: int) -> None:
    error = _error(PDDLSyntaxError, DOMAIN.replace(old, new))
    assert error.file == "dom.pddl" and error.line == line
    assert f"opened at line {line} is never closed" in str(error)


def test_unexpected_closing_paren() -> None:
    error = _error(PDDLSyntaxError, DOMAIN + ")\n")
    assert (error.file, error.line) == ("dom.pddl", 9) and "unexpected ')'" in str(error)


def test_unexpected_token_in_action() -> None:
    error = _error(PDDLSyntaxError, DOMAIN.replace(":effect", ":effects"))
    assert error.line == 8 and "':effect'" in str(error)


@pytest.mark.parametrize(
    "where,domain,problem,line",
    [
        ("precondition", DOMAIN.replace("(clear ?x) (clear ?y))", "(clear ?x) (free ?y))"), None, 7),
        ("effect", DOMAIN.replace("(on ?x ?y) (not", "(onn ?x ?y) (not"), None, 8),
        ("init", DOMAIN, PROBLEM.replace("(clear b))", "(free b))"), 5),
        ("goal", DOMAIN, PROBLEM.replace("(:goal (on a b))", "(:goal (above a b))"), 6),
    ],
)
def test_undefined_predicate(where: str, domain: str, problem: str | None, line: int) -> None:
    error = _error(UndefinedSymbolError, domain, problem)
    assert error.line == line and error.file == ("dom.pddl" if problem is None else "prob.pddl")
    assert "undefined predicate" in str(error)


def test_undefined_type() -> None:
    error = _error(UndefinedSymbolError, DOMAIN.replace("(clear ?x - block)", "(clear ?x - cube)"))
    assert (error.file, error.line) == ("dom.pddl", 4) and "undefined type 'cube'" in str(error)


def test_goal_mentions_unknown_object() -> None:
    error = _error(UndefinedSymbolError, DOMAIN, PROBLEM.replace("(on a b)", "(on a z)"))
    assert (error.file, error.line) == ("prob.pddl", 6)
    assert "goal mentions unknown object 'z'" in str(error)


def test_init_mentions_unknown_object() -> None:
    error = _error(UndefinedSymbolError, DOMAIN, PROBLEM.replace("(clear b))", "(clear c))"))
    assert (error.file, error.line) == ("prob.pddl", 5) and "'c'" in str(error)


def test_undefined_variable_in_action() -> None:
    error = _error(UndefinedSymbolError, DOMAIN.replace("(not (clear ?y))", "(not (clear ?z))"))
    assert (error.file, error.line) == ("dom.pddl", 8) and "undefined variable '?z'" in str(error)


def test_wrong_arity_says_expected_and_got() -> None:
    error = _error(ArityError, DOMAIN, PROBLEM.replace("(clear b))", "(clear a b))"))
    assert (error.file, error.line) == ("prob.pddl", 5)
    assert "expects 1 argument(s), got 2" in str(error)


def test_domain_name_mismatch() -> None:
    error = _error(UndefinedSymbolError, DOMAIN, PROBLEM.replace("(:domain d)", "(:domain blocks)"))
    assert (error.file, error.line) == ("prob.pddl", 2) and "'blocks'" in str(error) and "'d'" in str(error)


@pytest.mark.parametrize(
    "text,line,word",
    [
        (
            DOMAIN.replace("(clear ?x - block))", "(clear ?x - block) (free ?x - block))").replace(
                "  (:action move", "  (:derived (free ?x - block) (not (free ?x)))\n  (:action move"
            ),
            5,
            "stratified",
        ),
        (
            DOMAIN.replace("  (:action move", "  (:derived (on ?x ?y - block) (clear ?x))\n  (:action move"),
            5,
            "changes derived predicate 'on'",
        ),
        (DOMAIN.replace("(:action move", "(:durative-action move"), 5, ":durative-action"),
        (DOMAIN.replace("(not (clear ?y))", "(decrease (fuel) 1)"), 8, "decrease"),
        (DOMAIN.replace(":typing", ":typing :numeric-fluents"), 2, ":numeric-fluents"),
        (
            DOMAIN.replace(":parameters (?x ?y - block)", ":parameters (?x - (either block object) ?y - block)"),
            6,
            "'either' types are accepted in predicate declarations only",
        ),
    ],
)
def test_unsupported_features(text: str, line: int, word: str) -> None:
    error = _error(UnsupportedFeatureError, text)
    assert (error.file, error.line) == ("dom.pddl", line) and word in str(error)


def test_missing_file_is_task_input_error(tmp_path: Path) -> None:
    with pytest.raises(TaskInputError, match="file not found: .*nope.pddl"):
        load_task(tmp_path / "nope.pddl", IPC / "blocks" / "domain.pddl")


def test_list_where_a_name_belongs_is_a_syntax_error() -> None:
    error = _error(PDDLSyntaxError, DOMAIN.replace("(and (clear ?x) (clear ?y))", "(and ((clear ?x)) (clear ?y))"))
    assert (error.file, error.line) == ("dom.pddl", 7) and "expected a predicate name" in str(error)


# -- lenient where Fast Downward's reader is lenient ----------------------------------------------------------
LENIENT_DOMAIN = """; a comment before the definition
(DEFINE (DOMAIN Planes)            ; upper case everywhere, no :requirements at all
  (:types aircraft place)
  (:predicates (at?a - aircraft ?p - place) (Ready?a - aircraft))   ; '?' right after a name
  (:action FLY :parameters (?a - aircraft ?from?to - place)
    :precondition (and (AT?a ?from) (ready ?a))
    :effect (and (at ?a?to) (not (at ?a ?from)))))
"""
LENIENT_PROBLEM = """(define (problem P1) (:domain PLANES)
  (:objects A1 - aircraft Home Away - place)
  (:init (at a1 home) (READY A1)) ; comment
  (:goal (AT a1 AWAY)))
"""


def test_question_mark_starts_a_variable_even_after_a_name() -> None:
    task = parse_task(LENIENT_DOMAIN, LENIENT_PROBLEM)
    assert [p.name for p in task.domain.predicates] == ["at", "ready"]
    fly = task.domain.action("fly")
    assert fly is not None and [p.name for p in fly.parameters] == ["?a", "?from", "?to"]
    assert Atom("at", ("a1", "home")) in task.problem.init and task.domain.requirements == ()


def test_lenient_task_is_planned_like_the_driver_plans_it(planner) -> None:
    from domains.validate import validate_plan

    task = parse_task(LENIENT_DOMAIN, LENIENT_PROBLEM)
    result = planner.plan(task)
    assert result.solved and validate_plan(task, result.actions()).ok
    assert [str(a) for a in result.actions()] == ["(fly a1 home away)"]


def test_still_strict_on_arity_with_glued_variables() -> None:
    error = _error(ArityError, LENIENT_DOMAIN.replace("(ready ?a))", "(ready ?a?from))"))
    assert (error.file, error.line) == ("dom.pddl", 6) and "expects 1 argument(s), got 2" in str(error)


# -- what Fast Downward's translator refuses is refused here, with the line, not as "every delegate failed" --
COST_DOMAIN = (
    DOMAIN.replace(":typing)", ":typing :action-costs)")
    .replace("(:types block - object)", "(:types block - object)\n  (:functions (total-cost) (weight ?x - block))")
    .replace("(not (clear ?y)))))", "(not (clear ?y)) (increase (total-cost) 1))))")
)
COST_PROBLEM = PROBLEM.replace("(clear b))", "(clear b)\n         (= (weight a) 2) (= (total-cost) 0))")


def test_a_task_with_action_costs_parses() -> None:
    task = parse_task(COST_DOMAIN, COST_PROBLEM)
    assert task.domain.action("move").cost == 1.0
    assert dict(task.problem.numeric_init)[FunctionTerm("weight", ("a",))] == 2.0


@pytest.mark.parametrize("amount", ["-3", "2.5", "nan", "inf", "1e400"])
def test_a_cost_fast_downward_cannot_read_is_refused_with_its_line(amount: str) -> None:
    """Negative and fractional costs used to reach Fast Downward's translator, whose ParseError made every
    delegate fail (exit 1); nan and inf were read as numbers."""
    error = _error(TaskInputError, COST_DOMAIN.replace("(total-cost) 1)", f"(total-cost) {amount})"), None)
    assert (error.file, error.line) == ("dom.pddl", 9), error
    assert f"expected a whole number >= 0, got '{amount}'" in str(error)
    error = _error(TaskInputError, COST_DOMAIN, COST_PROBLEM.replace("(weight a) 2)", f"(weight a) {amount})"))
    assert (error.file, error.line) == ("prob.pddl", 6), error
    assert f"expected a whole number >= 0, got '{amount}'" in str(error)


@pytest.mark.parametrize(
    "domain,problem,line,name",
    [
        (DOMAIN, PROBLEM.replace("(:objects a b - block)", "(:objects a b - block a - block)"), 3, "a"),
        (
            DOMAIN.replace("(:predicates", "(:constants t - block)\n  (:predicates"),
            PROBLEM.replace("(:objects a b - block)", "(:objects a b t - block)"),
            3,
            "t",
        ),
    ],
)
def test_an_object_declared_twice_is_refused_with_its_line(domain: str, problem: str, line: int, name: str) -> None:
    """Fast Downward refuses duplicate objects (constants included); that used to surface as every delegate
    failing (exit 1) instead of bad input."""
    error = _error(TaskInputError, domain, problem)
    assert (error.file, error.line) == ("prob.pddl", line), error
    assert f"object '{name}' is declared twice" in str(error)


@pytest.mark.parametrize(
    "domain,problem,where,message",
    [
        (
            DOMAIN.replace("(clear ?x - block))", "(clear ?x - block))\n  (:predicates (free ?x - block))"),
            None,
            ("dom.pddl", 5),
            "a second '(:predicates ...)' section",
        ),
        (
            DOMAIN.replace("(:types block - object)", "(:types block - object)\n  (:types cube - object)"),
            None,
            ("dom.pddl", 4),
            "a second '(:types ...)' section",
        ),
        (
            DOMAIN.replace("(not (clear ?y)))))", "(not (clear ?y))))\n  (:constants t - block))"),
            None,
            ("dom.pddl", 9),
            "'(:constants ...)' after the first :action or :derived",
        ),
        (
            DOMAIN,
            PROBLEM.replace("(:goal (on a b)))", "(:goal (on a b))\n  (:goal (on b a)))"),
            ("prob.pddl", 7),
            ":goal",
        ),
        (DOMAIN, PROBLEM.replace("(clear b))", "(clear b))\n  (:init (clear a))"), ("prob.pddl", 6), ":init"),
        (
            DOMAIN,
            PROBLEM.replace(
                "  (:init (clear a)\n         (clear b))\n  (:goal (on a b)))", "  (:goal (on a b))\n  (:init))"
            ),
            ("prob.pddl", 5),
            ":init",
        ),
        (DOMAIN, PROBLEM.replace("  (:init (clear a)\n         (clear b))\n", ""), ("prob.pddl", 1), "(:init ...)"),
    ],
    ids=[
        "two-predicates",
        "two-types",
        "constants-after-action",
        "two-goals",
        "two-inits",
        "init-after-goal",
        "no-init",
    ],
)
def test_sections_fast_downward_refuses_are_refused_with_their_line(domain, problem, where, message) -> None:
    """Fast Downward's translator refuses a domain section given twice or after the actions, and a problem
    whose sections are not domain, requirements, objects, init, goal, metric, in that order, each once: these
    used to surface as every delegate failing (exit 1). A second :types section also replaced the first, so the
    error came later, as an undefined type in the problem."""
    error = _error(TaskInputError, domain, problem)
    assert (error.file, error.line) == where, error
    assert message in str(error), error
