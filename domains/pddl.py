"""A PDDL reader that remembers where every token came from, so bad input gets `file:line: what was expected`.

It reads the classical fragment Fast Downward's translator accepts (STRIPS, typing with `either` in predicate
declarations, negative/disjunctive/quantified preconditions, equality, conditional and universally quantified
effects, derived predicates, action costs from constants or static cost functions) into `domains.model`, as
leniently as that translator reads it (case, comments, `?` starting a token, no `:requirements` at all) and as
strictly where a mistake would change the task's meaning (arity, undeclared symbols). Numeric fluents beyond
action costs and durative actions are refused with the file and line. It is a plain line-by-line tokenizer plus
a stack-based s-expression builder: no regex per token and no unified-planning import, because it runs on the
planning path and must cost milliseconds.

Layout: the tokenizer and s-expression builder are `domains.sexpr`; the body of a definition (typed lists, terms,
conditions, effects, costs, and the `_Ctx` of declared symbols they are checked against) is `domains.pddl_formulas`,
shared with the JSON task reader; the `(define ...)` frame, the domain sections, derived-predicate checks and
`parse_domain` are `domains.pddl_domain`; this module is the top level: the problem sections and the public entry
points `parse_problem` and `parse_task`.
"""

from __future__ import annotations

from domains.errors import ArityError, PDDLSyntaxError, UndefinedSymbolError, UnsupportedFeatureError
from domains.model import TRUE, Atom, Domain, Formula, FunctionTerm, Problem, Task
from domains.pddl_domain import _define, _requirements, parse_domain
from domains.pddl_formulas import (
    TOTAL_COST,
    _atom,
    _Ctx,
    _declare_objects,
    _expect_list,
    _expect_name,
    _formula,
    _number,
    _term,
)
from domains.sexpr import SList, read_sexpr

__all__ = ["parse_problem", "parse_task"]


def _domain_ctx(domain: Domain, file: str | None) -> _Ctx:
    ctx = _Ctx(file)
    ctx.types |= {t for t, _ in domain.types} | {p for _, p in domain.types}
    ctx.objects = dict(domain.constants)
    ctx.predicates = {p.name: p.arity for p in domain.predicates}
    ctx.functions = {f.name: f.arity for f in domain.functions}
    ctx.signatures = {p.name: tuple(param.type for param in p.parameters) for p in domain.predicates}
    ctx.parents = dict(domain.types)
    return ctx


# A problem's sections as Fast Downward's translator reads them: in this order, each at most once, :init and
# :goal required. Another order, a repeat or a missing :init was its ParseError, which surfaced as every delegate
# failing (exit 1); here a second :goal also replaced the first.
PROBLEM_SECTIONS = (":domain", ":requirements", ":objects", ":init", ":goal", ":metric")


def _check_section_order(ctx: _Ctx, section: SList, key: str, last: int) -> int:
    """The position of `key` in `PROBLEM_SECTIONS`, after `last`, the position of the section before it."""
    position = PROBLEM_SECTIONS.index(key)
    if position <= last:
        where = "again" if position == last else f"after '({PROBLEM_SECTIONS[last]} ...)'"
        ctx.fail(
            PDDLSyntaxError,
            f"'({key} ...)' {where}; expected the sections {', '.join(PROBLEM_SECTIONS)} in this order, each once.",
            section,
            0,
        )
    return position


def parse_problem(text: str, domain: Domain, file: str | None = None) -> Problem:
    """Read a PDDL problem for `domain`; objects, predicates and functions are checked against it."""
    ctx = _domain_ctx(domain, file)
    top, name = _define(ctx, read_sexpr(text, file), "problem")
    domain_name = ""
    objects: list[tuple[str, str]] = []
    init: set[Atom] = set()
    numeric: list[tuple[FunctionTerm, float]] = []
    goal: Formula = TRUE
    minimize = False
    has_goal = has_init = False
    last = -1
    for index in range(2, len(top)):
        section = _expect_list(ctx, top, index, "a problem section such as '(:init ...)'")
        key = section[0] if section and isinstance(section[0], str) else ""
        if key in PROBLEM_SECTIONS:
            last = _check_section_order(ctx, section, key, last)
        if key == ":domain":
            domain_name = _expect_name(ctx, section, 1, "the domain name")
            if domain_name != domain.name:
                ctx.fail(
                    UndefinedSymbolError,
                    f"problem '{name}' is for domain '{domain_name}', but the "
                    f"domain file defines '{domain.name}'; expected matching names.",
                    section,
                    1,
                )
        elif key == ":requirements":
            _requirements(ctx, section)
        elif key == ":objects":
            objects += _declare_objects(ctx, section, "object")
        elif key == ":init":
            has_init = True
            for i in range(1, len(section)):
                fact = _expect_list(ctx, section, i, "an initial fact '(pred obj ...)'")
                if fact and fact[0] == "=" and len(fact) == 3 and isinstance(fact[1], SList):
                    numeric.append(_numeric_fact(ctx, fact))
                elif fact and isinstance(fact[0], SList):
                    ctx.fail(PDDLSyntaxError, "expected a predicate name after '(' in the initial state.", fact, 0)
                elif fact and fact[0] in ("not", "at", "and") and fact[0] not in ctx.predicates:
                    ctx.fail(
                        UnsupportedFeatureError if fact[0] == "at" else PDDLSyntaxError,
                        f"the initial state lists only positive atoms, got '({fact[0]} ...)'.",
                        section,
                        i,
                    )
                elif not fact:
                    ctx.fail(PDDLSyntaxError, "the initial state has an empty '()'; expected an atom.", section, i)
                else:
                    init.add(_atom(ctx, fact, {}, "the initial state"))
        elif key == ":goal":
            if len(section) != 2:
                ctx.fail(PDDLSyntaxError, "expected exactly one condition in '(:goal ...)'.", section, 0)
            goal, has_goal = _formula(ctx, section, 1, {}, "goal"), True
        elif key == ":metric":
            if (
                len(section) != 3
                or section[1] != "minimize"
                or not isinstance(section[2], SList)
                or list(section[2]) != [TOTAL_COST]
            ):
                ctx.fail(UnsupportedFeatureError, "only '(:metric minimize (total-cost))' is supported.", section, 0)
            minimize = True
        else:
            ctx.fail(
                UnsupportedFeatureError if key == ":constraints" else PDDLSyntaxError,
                f"unexpected problem section '{key}'; expected :domain, :objects, :init, :goal or :metric.",
                section,
                0,
            )
    if not domain_name:
        raise PDDLSyntaxError(f"problem '{name}' has no '(:domain <name>)' section.", file=file, line=top.line)
    if not has_init:
        raise PDDLSyntaxError(f"problem '{name}' has no '(:init ...)' section.", file=file, line=top.line)
    if not has_goal:
        raise PDDLSyntaxError(f"problem '{name}' has no '(:goal ...)' section.", file=file, line=top.line)
    return Problem(name, domain_name, tuple(objects), frozenset(init), tuple(numeric), goal, minimize)


def _numeric_fact(ctx: _Ctx, fact: SList) -> tuple[FunctionTerm, float]:
    term = fact[1]
    fname = term[0] if term else ""
    if fname not in ctx.functions:
        ctx.fail(
            UndefinedSymbolError,
            f"the initial state sets undefined function '{fname}'; expected one declared in :functions.",
            fact,
            1,
        )
    if len(term) - 1 != ctx.functions[fname]:
        ctx.fail(
            ArityError, f"function '{fname}' expects {ctx.functions[fname]} argument(s), got {len(term) - 1}.", fact, 1
        )
    args = tuple(_term(ctx, term, i, {}, "the initial state") for i in range(1, len(term)))
    return FunctionTerm(fname, args), _number(ctx, fact, 2, "the initial state")


def parse_task(
    domain_text: str, problem_text: str, domain_file: str | None = None, problem_file: str | None = None
) -> Task:
    """Read a domain and a problem into a `Task` that keeps the original texts for the planners."""
    domain = parse_domain(domain_text, domain_file)
    problem = parse_problem(problem_text, domain, problem_file)
    return Task(domain, problem, domain_pddl=domain_text, problem_pddl=problem_text)
