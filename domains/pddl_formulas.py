"""The body of a PDDL definition: typed lists, terms, conditions, effects and action costs, checked as they are read.

`domains.pddl_domain` and `domains.pddl` (the PDDL files) and `domains.json_task` (the JSON task format, whose
conditions and effects are PDDL expressions in strings) all build their formulas here, so one reader decides what a
condition or an effect means in either format. Everything reads from `domains.sexpr` lists, whose per-item line
numbers give every error its `file:line`, and checks against a `_Ctx`: the types, objects, predicates and functions
declared so far. The caller fills the context (from `:types`/`:constants`/`:predicates` sections, from a parsed
domain, or from JSON declarations); the functions here only read it and never declare a symbol themselves. Split out
of `domains.pddl` (which keeps the problem sections and the public entry points; the domain sections are
`domains.pddl_domain`) so no reader is over ~400 lines; the names stay underscored because they are internal to the
readers, not an API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

from domains.errors import ArityError, PDDLSyntaxError, TypeMismatchError, UndefinedSymbolError, UnsupportedFeatureError
from domains.formulas import EITHER, either_types
from domains.model import (
    OBJECT,
    TRUE,
    And,
    Atom,
    Cost,
    Effect,
    Equals,
    Exists,
    Forall,
    Formula,
    FunctionTerm,
    Imply,
    Not,
    Or,
    Parameter,
    is_whole_cost,
)
from domains.sexpr import SList

TOTAL_COST = "total-cost"
_NUMERIC_EFFECTS = frozenset({"decrease", "assign", "scale-up", "scale-down"})
_COMPARISONS = frozenset({"<", ">", "<=", ">="})


def _line(parent: SList, index: int) -> int:
    return parent.lines[index] if index < len(parent.lines) else parent.line


@dataclass
class _Ctx:
    """What is declared so far; used for the semantic checks."""

    file: str | None
    types: set[str] = field(default_factory=lambda: {OBJECT})
    objects: dict[str, str] = field(default_factory=dict)
    predicates: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)
    # With `signatures` (a problem's context): each predicate's parameter types, checked against the types of
    # the objects an atom names (`parents`: each type's parent type).
    signatures: dict[str, tuple[str, ...]] | None = None
    parents: dict[str, str] = field(default_factory=dict)

    def is_a(self, type_name: str, wanted: str) -> bool:
        """Whether `type_name` is `wanted` or one of its subtypes (of a member of an `(either ...)` type)."""
        members = either_types(wanted)
        if members is not None:
            return any(self.is_a(type_name, member) for member in members)
        seen: set[str] = set()
        current: str | None = type_name
        while current is not None and current not in seen:
            if current == wanted or wanted == OBJECT:
                return True
            seen.add(current)
            current = self.parents.get(current)
        return False

    def fail(self, cls: type, message: str, parent: SList, index: int) -> NoReturn:
        raise cls(message, file=self.file, line=_line(parent, index))

    def fail_at(self, cls: type, message: str, line: int) -> NoReturn:
        raise cls(message, file=self.file, line=line)


def _expect_list(ctx: _Ctx, parent: SList, index: int, what: str) -> SList:
    if index >= len(parent):
        ctx.fail(PDDLSyntaxError, f"expected {what}, but the list ends here.", parent, index)
    item = parent[index]
    if not isinstance(item, SList):
        ctx.fail(PDDLSyntaxError, f"expected {what} in parentheses, got '{item}'.", parent, index)
    return item


def _expect_name(ctx: _Ctx, parent: SList, index: int, what: str) -> str:
    if index >= len(parent):
        ctx.fail(PDDLSyntaxError, f"expected {what}, but the list ends here.", parent, index)
    item = parent[index]
    if isinstance(item, SList):
        ctx.fail(PDDLSyntaxError, f"expected {what} (a name), got a parenthesised list.", parent, index)
    return item


def _typed_list(
    ctx: _Ctx, items: SList, start: int, what: str, check_types: bool = True, either_allowed: bool = False
) -> list[tuple[str, str, int]]:
    """`a b - t c` -> [(a, t, line), (b, t, line), (c, object, line)]. An `(either t1 t2)` type (allowed where
    Fast Downward allows it: predicate declarations) is kept as the text `(either t1 t2)`."""
    result: list[tuple[str, str, int]] = []
    pending: list[tuple[str, int]] = []
    i = start
    while i < len(items):
        item = items[i]
        if isinstance(item, SList):
            ctx.fail(PDDLSyntaxError, f"expected a {what} name, got a parenthesised list.", items, i)
        if item == "-":
            if not pending:
                ctx.fail(PDDLSyntaxError, f"'-' must follow at least one {what} name.", items, i)
            if i + 1 >= len(items):
                ctx.fail(PDDLSyntaxError, "expected a type name after '-'.", items, i)
            type_name = items[i + 1]
            if isinstance(type_name, SList):
                if type_name and type_name[0] == EITHER:
                    type_name = _either(ctx, items, i + 1, either_allowed)
                else:
                    ctx.fail(PDDLSyntaxError, "expected a type name after '-'.", items, i + 1)
            elif check_types and type_name not in ctx.types:
                ctx.fail(
                    UndefinedSymbolError,
                    f"undefined type '{type_name}'; declared types are: {', '.join(sorted(ctx.types))}.",
                    items,
                    i + 1,
                )
            result.extend((name, type_name, line) for name, line in pending)
            pending = []
            i += 2
            continue
        pending.append((item, items.lines[i]))
        i += 1
    result.extend((name, OBJECT, line) for name, line in pending)
    return result


def _either(ctx: _Ctx, items: SList, index: int, allowed: bool) -> str:
    """`(either t1 t2)` -> "(either t1 t2)", its member types checked."""
    expr = items[index]
    if not allowed:
        ctx.fail(
            UnsupportedFeatureError,
            "'either' types are accepted in predicate declarations only (as in "
            "Fast Downward); declare a common supertype here instead.",
            items,
            index,
        )
    members = []
    for i in range(1, len(expr)):
        member = _expect_name(ctx, expr, i, "a type name inside 'either'")
        if member not in ctx.types:
            ctx.fail(
                UndefinedSymbolError,
                f"undefined type '{member}' in 'either'; declared types are: {', '.join(sorted(ctx.types))}.",
                expr,
                i,
            )
        members.append(member)
    if not members:
        ctx.fail(PDDLSyntaxError, "expected at least one type name in '(either ...)'.", items, index)
    return "(" + " ".join((EITHER, *members)) + ")"


def _parameters(
    ctx: _Ctx, items: SList, what: str, scope: dict[str, str] | None = None, either_allowed: bool = False
) -> tuple[Parameter, ...]:
    params = []
    seen = set(scope or ())
    for name, type_name, line in _typed_list(ctx, items, 0, "variable", either_allowed=either_allowed):
        if not name.startswith("?"):
            ctx.fail_at(PDDLSyntaxError, f"expected a variable starting with '?' in {what}, got '{name}'.", line)
        if name in seen and scope is None:
            ctx.fail_at(PDDLSyntaxError, f"variable '{name}' is declared twice in {what}.", line)
        seen.add(name)
        params.append(Parameter(name, type_name))
    return tuple(params)


def _term(ctx: _Ctx, parent: SList, index: int, scope: dict[str, str], where: str) -> str:
    term = parent[index]
    if isinstance(term, SList):
        ctx.fail(
            UnsupportedFeatureError if term and term[0] in ctx.functions else PDDLSyntaxError,
            f"{where}: expected an object or variable, got a parenthesised expression "
            "(numeric expressions are only supported as action costs).",
            parent,
            index,
        )
    if term.startswith("?"):
        if term not in scope:
            ctx.fail(
                UndefinedSymbolError,
                f"{where} uses undefined variable '{term}'; declare it in :parameters or a quantifier.",
                parent,
                index,
            )
    elif term not in ctx.objects:
        ctx.fail(
            UndefinedSymbolError,
            f"{where} mentions unknown object '{term}'; expected a declared object or constant.",
            parent,
            index,
        )
    return term


def _atom(ctx: _Ctx, expr: SList, scope: dict[str, str], where: str) -> Atom:
    name = expr[0]
    if isinstance(name, SList):
        ctx.fail(PDDLSyntaxError, f"{where}: expected a predicate name, got a parenthesised list.", expr, 0)
    arity = ctx.predicates.get(name)
    if arity is None:
        ctx.fail(
            UndefinedSymbolError,
            f"{where} uses undefined predicate '{name}'; expected one declared in :predicates.",
            expr,
            0,
        )
    if len(expr) - 1 != arity:
        ctx.fail(ArityError, f"{where}: predicate '{name}' expects {arity} argument(s), got {len(expr) - 1}.", expr, 0)
    terms = tuple(_term(ctx, expr, i, scope, where) for i in range(1, len(expr)))
    if ctx.signatures is not None:
        for i, (term, wanted) in enumerate(zip(terms, ctx.signatures.get(name, ())), start=1):
            if not term.startswith("?") and not ctx.is_a(ctx.objects[term], wanted):
                ctx.fail(
                    TypeMismatchError,
                    f"{where}: object '{term}' is of type '{ctx.objects[term]}', but argument {i} of predicate "
                    f"'{name}' is of type '{wanted}'; expected an object of that type or one of its subtypes.",
                    expr,
                    i,
                )
    return Atom(name, terms)


def _formula(ctx: _Ctx, parent: SList, index: int, scope: dict[str, str], where: str) -> Formula:
    expr = _expect_list(ctx, parent, index, "a condition")
    if not expr:
        ctx.fail(PDDLSyntaxError, f"{where}: expected a condition, got '()'.", parent, index)
    head = expr[0]
    if isinstance(head, SList):
        ctx.fail(PDDLSyntaxError, f"{where}: expected a predicate name or a connective after '(', got '('.", expr, 0)
    if head == "and":
        return And(tuple(_formula(ctx, expr, i, scope, where) for i in range(1, len(expr))))
    if head == "or":
        return Or(tuple(_formula(ctx, expr, i, scope, where) for i in range(1, len(expr))))
    if head == "not":
        if len(expr) != 2:
            ctx.fail(PDDLSyntaxError, f"{where}: 'not' takes exactly one condition.", expr, 0)
        return Not(_formula(ctx, expr, 1, scope, where))
    if head == "imply":
        if len(expr) != 3:
            ctx.fail(PDDLSyntaxError, f"{where}: 'imply' takes exactly two conditions.", expr, 0)
        return Imply(_formula(ctx, expr, 1, scope, where), _formula(ctx, expr, 2, scope, where))
    if head in ("exists", "forall"):
        if len(expr) != 3:
            ctx.fail(PDDLSyntaxError, f"{where}: expected '({head} (<variables>) <condition>)'.", expr, 0)
        params = _parameters(ctx, _expect_list(ctx, expr, 1, "a variable list"), f"'{head}'", scope)
        inner = dict(scope) | {p.name: p.type for p in params}
        body = _formula(ctx, expr, 2, inner, where)
        return Exists(params, body) if head == "exists" else Forall(params, body)
    if head == "=":
        if len(expr) != 3:
            ctx.fail(PDDLSyntaxError, f"{where}: '=' takes exactly two arguments.", expr, 0)
        if isinstance(expr[1], SList) or isinstance(expr[2], SList):
            ctx.fail(UnsupportedFeatureError, f"{where}: numeric comparisons are not supported.", expr, 0)
        return Equals(_term(ctx, expr, 1, scope, where), _term(ctx, expr, 2, scope, where))
    if head in _COMPARISONS:
        ctx.fail(UnsupportedFeatureError, f"{where}: numeric comparisons ('{head}') are not supported.", expr, 0)
    return _atom(ctx, expr, scope, where)


def _conjoin(first: Formula, second: Formula) -> Formula:
    return second if first == TRUE else And((first, second))


def _effects(
    ctx: _Ctx,
    parent: SList,
    index: int,
    scope: dict[str, str],
    where: str,
    params: tuple[Parameter, ...],
    condition: Formula,
    out: list[Effect],
    costs: list[Cost],
) -> None:
    expr = _expect_list(ctx, parent, index, "an effect")
    if not expr:
        ctx.fail(PDDLSyntaxError, f"{where}: expected an effect, got '()'.", parent, index)
    head = expr[0]
    if isinstance(head, SList):
        ctx.fail(
            PDDLSyntaxError,
            f"{where}: expected a predicate name or 'and', 'not', 'forall', 'when' after '(', got '('.",
            expr,
            0,
        )
    if head == "and":
        for i in range(1, len(expr)):
            _effects(ctx, expr, i, scope, where, params, condition, out, costs)
    elif head == "not":
        if len(expr) != 2:
            ctx.fail(PDDLSyntaxError, f"{where}: 'not' takes exactly one atom.", expr, 0)
        inner = _expect_list(ctx, expr, 1, "an atom")
        if not inner or inner[0] in ("and", "not", "forall", "when", "or"):
            ctx.fail(PDDLSyntaxError, f"{where}: expected an atom inside 'not' in an effect.", expr, 1)
        out.append(Effect(_atom(ctx, inner, scope, where), True, condition, params))
    elif head == "forall":
        if len(expr) != 3:
            ctx.fail(PDDLSyntaxError, f"{where}: expected '(forall (<variables>) <effect>)'.", expr, 0)
        new = _parameters(ctx, _expect_list(ctx, expr, 1, "a variable list"), "'forall'", scope)
        inner_scope = dict(scope) | {p.name: p.type for p in new}
        _effects(ctx, expr, 2, inner_scope, where, params + new, condition, out, costs)
    elif head == "when":
        if len(expr) != 3:
            ctx.fail(PDDLSyntaxError, f"{where}: expected '(when <condition> <effect>)'.", expr, 0)
        cond = _conjoin(condition, _formula(ctx, expr, 1, scope, where))
        _effects(ctx, expr, 2, scope, where, params, cond, out, costs)
    elif head == "increase":
        costs.append(_cost(ctx, expr, scope, where, bool(params) or condition != TRUE))
    elif head in _NUMERIC_EFFECTS:
        ctx.fail(
            UnsupportedFeatureError,
            f"{where}: numeric effect '{head}' is not supported; only '(increase (total-cost) ...)' is.",
            expr,
            0,
        )
    else:
        out.append(Effect(_atom(ctx, expr, scope, where), False, condition, params))


def _cost(ctx: _Ctx, expr: SList, scope: dict[str, str], where: str, nested: bool) -> Cost:
    if len(expr) != 3:
        ctx.fail(PDDLSyntaxError, f"{where}: expected '(increase (total-cost) <amount>)'.", expr, 0)
    target = expr[1]
    if not (isinstance(target, SList) and list(target) == [TOTAL_COST]):
        ctx.fail(
            UnsupportedFeatureError,
            f"{where}: only '(increase (total-cost) ...)' is supported; numeric fluents are not.",
            expr,
            1,
        )
    if nested:
        ctx.fail(UnsupportedFeatureError, f"{where}: a cost inside 'forall' or 'when' is not supported.", expr, 0)
    amount = expr[2]
    if isinstance(amount, SList):
        if not amount or isinstance(amount[0], SList) or amount[0] not in ctx.functions:
            ctx.fail(
                UndefinedSymbolError,
                f"{where}: expected a number or a function declared in :functions as the cost.",
                expr,
                2,
            )
        name = amount[0]
        if len(amount) - 1 != ctx.functions[name]:
            ctx.fail(
                ArityError,
                f"{where}: function '{name}' expects {ctx.functions[name]} argument(s), got {len(amount) - 1}.",
                amount,
                0,
            )
        return FunctionTerm(name, tuple(_term(ctx, amount, i, scope, where) for i in range(1, len(amount))))
    return _number(ctx, expr, 2, where)


def _declare_objects(ctx: _Ctx, section: SList, what: str) -> list[tuple[str, str]]:
    """The (name, type) pairs a problem's :objects or a domain's :constants section declares (`what`: "object",
    "constant"), each registered in `ctx.objects`. Fast Downward's translator refuses an object declared twice (a
    domain constant counts), and its ParseError surfaced as every delegate failing (exit 1) instead of bad input
    at the line: refused here."""
    declared = []
    for name, type_name, line in _typed_list(ctx, section, 1, what):
        if name in ctx.objects:
            ctx.fail_at(
                PDDLSyntaxError,
                f"object '{name}' is declared twice (in :objects or as a constant of the domain); expected each "
                "object once.",
                line,
            )
        ctx.objects[name] = type_name
        declared.append((name, type_name))
    return declared


def _number(ctx: _Ctx, parent: SList, index: int, where: str) -> float:
    """A cost constant (an action's, or a cost function's value in the initial state): a whole number >= 0, the
    only numbers Fast Downward's translator reads. Its ParseError on `-3` or `2.5` surfaced as every delegate
    failing (exit 1), and `nan`/`inf` were read as numbers."""
    try:
        value = float(parent[index])
    except (TypeError, ValueError):
        ctx.fail(PDDLSyntaxError, f"{where}: expected a number, got '{parent[index]}'.", parent, index)
    if not is_whole_cost(value):
        ctx.fail(
            UnsupportedFeatureError,
            f"{where}: expected a whole number >= 0, got '{parent[index]}' (Fast Downward reads no other costs).",
            parent,
            index,
        )
    return value
