"""The PDDL domain reader: the `(define ...)` frame, the domain's sections, and its derived-predicate checks.

`parse_domain` reads `(define (domain ...) ...)` section by section (requirements, types, constants, predicates,
functions, actions, derived predicates) into a `domains.model.Domain`, checking each symbol against the `_Ctx`
it fills as it goes, and then checks the derived predicates as a whole (`_check_axioms`: never an effect, and
stratifiable). The frame and requirement checks (`_define`, `_requirements`) live here too: the problem reader
(`domains.pddl`) reuses them for `(define (problem ...) ...)`.

Its own file because a domain and a problem are read by separate passes that share only the frame and the
formula readers of `domains.pddl_formulas`; the JSON task reader (`domains.json_task`) reuses `_check_axioms`,
and the PDDL writer `distinct_parameters`, without the problem reader.
"""

from __future__ import annotations

from domains.errors import ArityError, PDDLSyntaxError, UndefinedSymbolError, UnsupportedFeatureError
from domains.features import axiom_strata
from domains.model import OBJECT, TRUE, ActionSchema, Atom, Axiom, Cost, Domain, Effect, Parameter, Predicate
from domains.pddl_formulas import (
    _Ctx,
    _declare_objects,
    _effects,
    _expect_list,
    _expect_name,
    _formula,
    _parameters,
    _typed_list,
)
from domains.sexpr import SList, new_list, read_sexpr

__all__ = ["SUPPORTED_REQUIREMENTS", "distinct_parameters", "parse_domain"]

# Exactly the requirement labels Fast Downward's translator accepts (pddl/tasks.py REQUIREMENT_LABELS).
SUPPORTED_REQUIREMENTS = frozenset(
    {
        ":strips",
        ":adl",
        ":typing",
        ":negation",
        ":equality",
        ":negative-preconditions",
        ":disjunctive-preconditions",
        ":existential-preconditions",
        ":universal-preconditions",
        ":quantified-preconditions",
        ":conditional-effects",
        ":derived-predicates",
        ":action-costs",
    }
)


def _define(ctx: _Ctx, root: SList, kind: str) -> tuple[SList, str]:
    """Check the `(define (<kind> name) ...)` frame; return it and the name."""
    if not root:
        raise PDDLSyntaxError(f"empty input: expected '(define ({kind} <name>) ...)'.", file=ctx.file, line=1)
    top = _expect_list(ctx, root, 0, f"'(define ({kind} <name>) ...)'")
    if len(root) > 1:
        ctx.fail(
            PDDLSyntaxError,
            f"unexpected token after the end of the {kind} definition; expected nothing after its closing ')'.",
            root,
            1,
        )
    if not top or top[0] != "define":
        ctx.fail(
            PDDLSyntaxError, f"expected '(define ({kind} <name>) ...)', got '({top[0] if top else ''} ...'.", root, 0
        )
    header = _expect_list(ctx, top, 1, f"'({kind} <name>)'")
    if len(header) != 2 or header[0] != kind:
        ctx.fail(PDDLSyntaxError, f"expected '({kind} <name>)' after 'define'.", top, 1)
    return top, _expect_name(ctx, header, 1, f"the {kind} name")


def _requirements(ctx: _Ctx, section: SList) -> tuple[str, ...]:
    for i in range(1, len(section)):
        req = _expect_name(ctx, section, i, "a requirement")
        if req not in SUPPORTED_REQUIREMENTS:
            ctx.fail(
                UnsupportedFeatureError,
                f"requirement '{req}' is not supported; supported: {' '.join(sorted(SUPPORTED_REQUIREMENTS))}.",
                section,
                i,
            )
    return tuple(section[1:])


def distinct_parameters(params: tuple[Parameter, ...]) -> tuple[Parameter, ...]:
    """Rename repeated variables in a predicate declaration (logistics00 has `(in ?obj ?obj)`, which Fast
    Downward accepts), so the model and everything written from it have distinct names."""
    seen: set[str] = set()
    result = []
    for p in params:
        name, n = p.name, 2
        while name in seen:
            name, n = f"{p.name}-{n}", n + 1
        seen.add(name)
        result.append(Parameter(name, p.type))
    return tuple(result)


# The sections before the first :action or :derived, each at most once, as Fast Downward's translator reads them
# (their order is free: it only warns). A repeat, or one after the actions, was its ParseError, which surfaced as
# every delegate failing (exit 1); a second :types section also replaced the first here.
HEADER_SECTIONS = (":requirements", ":types", ":constants", ":predicates", ":functions")


def _check_header_section(ctx: _Ctx, section: SList, key: str, seen: set[str], after_actions: bool) -> None:
    if key in seen:
        ctx.fail(
            PDDLSyntaxError,
            f"a second '({key} ...)' section; expected each of {', '.join(HEADER_SECTIONS)} at most once.",
            section,
            0,
        )
    if after_actions:
        ctx.fail(
            PDDLSyntaxError,
            f"'({key} ...)' after the first :action or :derived; expected {', '.join(HEADER_SECTIONS)} before them.",
            section,
            0,
        )
    seen.add(key)


def parse_domain(text: str, file: str | None = None) -> Domain:
    """Read a PDDL domain; raise a `TaskInputError` subclass with file and line on bad input."""
    ctx = _Ctx(file)
    top, name = _define(ctx, read_sexpr(text, file), "domain")
    requirements: tuple[str, ...] = ()
    types: list[tuple[str, str]] = []
    constants: list[tuple[str, str]] = []
    predicates: list[Predicate] = []
    functions: list[Predicate] = []
    actions: list[ActionSchema] = []
    axioms: list[Axiom] = []
    derived_lines: dict[str, int] = {}
    seen: set[str] = set()
    for index in range(2, len(top)):
        section = _expect_list(ctx, top, index, "a domain section such as '(:predicates ...)'")
        key = section[0] if section and isinstance(section[0], str) else ""
        if key in HEADER_SECTIONS:
            _check_header_section(ctx, section, key, seen, after_actions=bool(actions or axioms))
        if key == ":requirements":
            requirements = _requirements(ctx, section)
        elif key == ":types":
            entries = _typed_list(ctx, section, 1, "type", check_types=False)
            declared = {t for t, _, _ in entries}
            ctx.types |= declared
            types = [(t, parent) for t, parent, _ in entries if t != OBJECT]
            for _, parent, _ in entries:
                if parent not in ctx.types:  # a parent used but not listed is implicitly a type
                    ctx.types.add(parent)
                    types.append((parent, OBJECT))
        elif key == ":constants":
            constants += _declare_objects(ctx, section, "constant")
        elif key == ":predicates":
            for i in range(1, len(section)):
                decl = _expect_list(ctx, section, i, "a predicate declaration '(name ?x ...)'")
                pname = _expect_name(ctx, decl, 0, "a predicate name")
                params = distinct_parameters(
                    _parameters(ctx, _slice(decl, 1), f"predicate '{pname}'", {}, either_allowed=True)
                )
                ctx.predicates[pname] = len(params)
                predicates.append(Predicate(pname, params))
        elif key == ":functions":
            functions.extend(_functions(ctx, section))
        elif key == ":action":
            actions.append(_action(ctx, section))
        elif key == ":derived":
            axioms.append(_axiom(ctx, section))
            derived_lines.setdefault(axioms[-1].head.predicate, section.line)
        elif key in (":durative-action", ":process", ":event", ":constraints"):
            ctx.fail(
                UnsupportedFeatureError,
                f"'{key}' is not supported; expected a classical domain "
                "(:requirements, :types, :constants, :predicates, :functions, :action, :derived).",
                section,
                0,
            )
        else:
            ctx.fail(
                PDDLSyntaxError,
                f"unknown domain section '{key}'; expected :requirements, :types, "
                ":constants, :predicates, :functions, :action or :derived.",
                section,
                0,
            )
    domain = Domain(
        name,
        requirements,
        tuple(types),
        tuple(constants),
        tuple(predicates),
        tuple(functions),
        tuple(actions),
        tuple(axioms),
    )
    _check_axioms(ctx, domain, derived_lines)
    return domain


def _axiom(ctx: _Ctx, section: SList) -> Axiom:
    """`(:derived (p ?x - t ...) <condition>)`: the head's predicate must be declared in :predicates."""
    if len(section) != 3:
        ctx.fail(PDDLSyntaxError, "expected '(:derived (<predicate> <variables>) <condition>)'.", section, 0)
    head = _expect_list(ctx, section, 1, "the derived predicate '(<predicate> <variables>)'")
    pname = _expect_name(ctx, head, 0, "a derived predicate name")
    where = f"derived predicate '{pname}'"
    params = _parameters(ctx, _slice(head, 1), where)
    arity = ctx.predicates.get(pname)
    if arity is None:
        ctx.fail(UndefinedSymbolError, f"{where} is not declared in :predicates; expected it there too.", head, 0)
    if arity != len(params):
        ctx.fail(ArityError, f"{where}: predicate '{pname}' expects {arity} argument(s), got {len(params)}.", head, 0)
    scope = {p.name: p.type for p in params}
    body = _formula(ctx, section, 2, scope, f"the condition of {where}")
    return Axiom(Atom(pname, tuple(p.name for p in params)), params, body)


def _check_axioms(ctx: _Ctx, domain: Domain, lines: dict[str, int]) -> None:
    """Derived predicates are computed, never set: no action may change one, and they must stratify."""
    derived = domain.derived_predicates
    if not derived:
        return
    for schema in domain.actions:
        for effect in schema.effects:
            if effect.atom.predicate in derived:
                ctx.fail_at(
                    UnsupportedFeatureError,
                    f"action '{schema.name}' changes derived predicate "
                    f"'{effect.atom.predicate}'; derived predicates are computed by their :derived rules "
                    "and cannot be effects.",
                    lines[effect.atom.predicate],
                )
    try:
        axiom_strata(domain)
    except ValueError as error:
        predicate = str(error).split("'")[1]
        ctx.fail_at(UnsupportedFeatureError, f"{error}.", lines[predicate])


def _slice(items: SList, start: int) -> SList:
    part = new_list(items.lines[start] if start < len(items.lines) else items.line)
    part.extend(items[start:])
    part.lines = items.lines[start:]
    return part


def _functions(ctx: _Ctx, section: SList) -> list[Predicate]:
    result: list[Predicate] = []
    i = 1
    while i < len(section):
        decl = _expect_list(ctx, section, i, "a function declaration '(name ?x ...)'")
        fname = _expect_name(ctx, decl, 0, "a function name")
        params = _parameters(ctx, _slice(decl, 1), f"function '{fname}'")
        ctx.functions[fname] = len(params)
        result.append(Predicate(fname, params))
        i += 1
        if i < len(section) and section[i] == "-":
            if i + 1 >= len(section) or section[i + 1] != "number":
                ctx.fail(
                    UnsupportedFeatureError,
                    f"function '{fname}' must be of type 'number'; object fluents are not supported.",
                    section,
                    i + 1,
                )
            i += 2
    return result


def _action(ctx: _Ctx, section: SList) -> ActionSchema:
    name = _expect_name(ctx, section, 1, "an action name")
    where = f"action '{name}'"
    fields: dict[str, int] = {}
    i = 2
    while i < len(section):
        key = section[i]
        if key not in (":parameters", ":precondition", ":effect"):
            ctx.fail(
                PDDLSyntaxError,
                f"{where}: expected ':parameters', ':precondition' or ':effect', "
                f"got '{key if not isinstance(key, SList) else '(...)'}'.",
                section,
                i,
            )
        if i + 1 >= len(section):
            ctx.fail(PDDLSyntaxError, f"{where}: '{key}' needs a value.", section, i)
        fields[key] = i + 1
        i += 2
    params: tuple[Parameter, ...] = ()
    if ":parameters" in fields:
        params = _parameters(
            ctx, _expect_list(ctx, section, fields[":parameters"], "a parameter list"), f"the parameters of {where}"
        )
    scope = {p.name: p.type for p in params}
    precondition = TRUE
    if ":precondition" in fields and section[fields[":precondition"]] != SList():
        precondition = _formula(ctx, section, fields[":precondition"], scope, f"the precondition of {where}")
    effects: list[Effect] = []
    costs: list[Cost] = []
    if ":effect" in fields and section[fields[":effect"]] != SList():
        _effects(ctx, section, fields[":effect"], scope, f"the effect of {where}", (), TRUE, effects, costs)
    if len(costs) > 1:
        ctx.fail(
            UnsupportedFeatureError,
            f"{where}: more than one '(increase (total-cost) ...)' is not supported.",
            section,
            fields[":effect"],
        )
    return ActionSchema(name, params, precondition, tuple(effects), costs[0] if costs else None)
