"""What the PDDL reader refuses, and where it says the problem is: syntax, undefined symbols, arity, unsupported
features, costs and sections Fast Downward cannot read (file, line and what was expected), and the lenient
spellings it still accepts as the driver does. Apart from `tests/test_pddl.py` (IPC tasks read and written back)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import IPC

from domains.errors import ArityError, PDDLSyntaxError, TaskInputError, UndefinedSymbolError, UnsupportedFeatureError
from domains.load import load_task
from domains.model import Atom, FunctionTerm
from domains.pddl import parse_task
from domains.pddl_domain import parse_domain

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


TYPED_DOMAIN = """(define (domain rel)
  (:requirements :strips :typing)
  (:types artifact service - object api - service)
  (:predicates (artifact-of ?a - artifact ?s - service) (done ?a - artifact) (linked ?x - (either artifact api)))
  (:action ship :parameters (?a - artifact ?s - service)
    :precondition (artifact-of ?a ?s) :effect (done ?a)))
"""


def _typed_problem(init: str, goal: str) -> str:
    return f"""(define (problem p) (:domain rel)
  (:objects v2 - artifact gateway - api store - service)
  (:init
    {init})
  (:goal {goal}))
"""


@pytest.mark.parametrize(
    ("init", "goal", "line", "said"),
    [
        # an artifact where a service belongs, and the other way round (arguments swapped)
        ("(artifact-of gateway v2)", "(done v2)", 4, "object 'gateway' is of type 'api', but argument 1 of predicate"),
        ("(artifact-of v2 gateway)", "(done gateway)", 5, "goal: object 'gateway' is of type 'api', but argument 1"),
        ("(artifact-of v2 gateway)", "(and (done v2) (linked store))", 5, "object 'store' is of type 'service'"),
    ],
)
def test_an_object_of_the_wrong_type_in_a_problem_atom_is_bad_input(init: str, goal: str, line: int, said: str):
    """A slip of argument order or type in :init or :goal is an error with file and line, as it is in a plan,
    not a task that silently proves unsolvable."""
    from domains.errors import TypeMismatchError

    error = _error(TypeMismatchError, TYPED_DOMAIN, _typed_problem(init, goal))
    assert error.file == "prob.pddl" and error.line == line, error
    assert said in str(error) and "expected an object of that type or one of its subtypes" in str(error)


def test_subtypes_either_types_and_quantified_variables_pass_the_type_check():
    problem = _typed_problem(
        "(artifact-of v2 gateway) (artifact-of v2 store) (linked gateway) (linked v2)",
        "(and (done v2) (forall (?s - service) (artifact-of v2 ?s)))",
    )
    task = parse_task(TYPED_DOMAIN, problem)
    assert Atom("artifact-of", ("v2", "gateway")) in task.problem.init  # an api is a service
