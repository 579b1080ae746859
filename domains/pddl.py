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
shared with the JSON task reader; this module is the top level: the `(define ...)` frame, the domain and problem
sections, derived-predicate checks, and the public entry points `parse_domain`, `parse_problem` and `parse_task`.
"""

from __future__ import annotations

from domains.errors import ArityError, PDDLSyntaxError, UndefinedSymbolError, UnsupportedFeatureError
from domains.features import axiom_strata
from domains.model import (
    OBJECT,
    TRUE,
    ActionSchema,
    Atom,
    Axiom,
    Cost,
    Domain,
    Effect,
    Formula,
    FunctionTerm,
    Parameter,
    Predicate,
    Problem,
    Task,
)
from domains.pddl_formulas import (
    TOTAL_COST,
    _atom,
    _Ctx,
    _effects,
    _expect_list,
    _expect_name,
    _formula,
    _number,
    _parameters,
    _term,
    _typed_list,
)
from domains.sexpr import SList, new_list, read_sexpr

__all__ = ["SUPPORTED_REQUIREMENTS", "TOTAL_COST", "distinct_parameters", "parse_domain", "parse_problem", "parse_task"]

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
    for index in range(2, len(top)):
        section = _expect_list(ctx, top, index, "a domain section such as '(:predicates ...)'")
        key = section[0] if section and isinstance(section[0], str) else ""
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
            for obj, type_name, _ in _typed_list(ctx, section, 1, "constant"):
                ctx.objects[obj] = type_name
                constants.append((obj, type_name))
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


def _domain_ctx(domain: Domain, file: str | None) -> _Ctx:
    ctx = _Ctx(file)
    ctx.types |= {t for t, _ in domain.types} | {p for _, p in domain.types}
    ctx.objects = dict(domain.constants)
    ctx.predicates = {p.name: p.arity for p in domain.predicates}
    ctx.functions = {f.name: f.arity for f in domain.functions}
    return ctx


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
    has_goal = False
    for index in range(2, len(top)):
        section = _expect_list(ctx, top, index, "a problem section such as '(:init ...)'")
        key = section[0] if section and isinstance(section[0], str) else ""
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
            for obj, type_name, _ in _typed_list(ctx, section, 1, "object"):
                ctx.objects[obj] = type_name
                objects.append((obj, type_name))
        elif key == ":init":
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
