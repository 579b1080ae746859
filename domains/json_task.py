"""A JSON task format for agent runtimes that do not speak PDDL.

A task is typed objects, predicates, actions (preconditions, add and delete lists, richer `effects`, an optional
cost), derived predicates, an initial state and a goal. Conditions and effects are written as in PDDL: a
precondition or goal entry is any PDDL condition (`"(on ?x ?y)"`, `"(not (clear ?x))"`,
`"(forall (?b - block) (clear ?b))"`), an `effects` entry any PDDL effect (`"(when (clear ?y) (on ?x ?y))"`,
`"(forall (?b - block) (not (on ?b ?x)))"`); a predicate argument may be typed `"(either a b)"`. That is the
fragment Fast Downward accepts, less numeric functions (costs are constants here). The file is checked by a
pydantic model (the schema `portfolio schema task` prints), then every string goes through the same reader and
checks as PDDL, so an unknown predicate is an `UndefinedSymbolError` here too. The resulting `Task` gets its PDDL
texts (and `:requirements`, from what the task really uses) from the writer.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from domains.errors import ArityError, SchemaError, TaskInputError, UndefinedSymbolError, UnsupportedFeatureError
from domains.formulas import EITHER
from domains.model import (
    OBJECT,
    TRUE,
    ActionSchema,
    And,
    Atom,
    Axiom,
    Domain,
    Effect,
    Formula,
    FunctionTerm,
    Parameter,
    Predicate,
    Problem,
    Task,
    is_whole_cost,
)
from domains.pddl_domain import _check_axioms
from domains.pddl_formulas import TOTAL_COST, _atom, _Ctx, _effects, _formula
from domains.pddl_writer import effect_to_pddl, formula_to_pddl, task_with_texts
from domains.sexpr import SList, read_sexpr


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JsonType(_Strict):
    name: str = Field(description="Type name.")
    parent: str = Field(OBJECT, description="Parent type; 'object' is the root.")


class JsonObject(_Strict):
    name: str
    type: str = OBJECT


class JsonPredicate(_Strict):
    name: str
    parameters: list[str] = Field(default_factory=list, description="The type of each argument, in order.")


class JsonParameter(_Strict):
    name: str = Field(pattern=r"^\?", description="Variable name starting with '?', e.g. '?x'.")
    type: str = OBJECT


class JsonAction(_Strict):
    name: str
    parameters: list[JsonParameter] = Field(default_factory=list)
    preconditions: list[str] = Field(
        default_factory=list,
        description="Conditions that must hold, e.g. '(on ?x ?y)', '(not (clear ?x))' "
        "or any PDDL condition ('(or ...)', '(exists (?b - block) ...)').",
    )
    add: list[str] = Field(default_factory=list, description="Atoms the action makes true, e.g. '(holding ?x)'.")
    delete: list[str] = Field(default_factory=list, description="Atoms the action makes false.")
    effects: list[str] = Field(
        default_factory=list,
        description="Other PDDL effects: conditional "
        "'(when <condition> <effect>)' and universal '(forall (<variables>) <effect>)'.",
    )
    cost: float | None = Field(None, ge=0, description="Action cost, a whole number >= 0; omit for unit-cost tasks.")


class JsonDerived(_Strict):
    name: str = Field(description="The derived predicate (declared in 'predicates' too).")
    parameters: list[JsonParameter] = Field(default_factory=list)
    condition: str = Field(description="PDDL condition under which the predicate holds, over the parameters.")


class JsonTask(_Strict):
    """A planning task: a domain (types, predicates, actions) and a problem (objects, init, goal)."""

    domain: str = Field("domain", description="Domain name.")
    name: str = Field("task", description="Problem name.")
    types: list[JsonType] = Field(default_factory=list)
    objects: list[JsonObject] = Field(default_factory=list)
    predicates: list[JsonPredicate]
    actions: list[JsonAction]
    derived: list[JsonDerived] = Field(
        default_factory=list,
        description="Derived predicates (axioms): rules computed in every state, never set by actions.",
    )
    init: list[str] = Field(default_factory=list, description="Atoms true in the initial state, e.g. '(on a b)'.")
    goal: list[str] = Field(description="Conditions that must hold at the end (any PDDL condition).")


def task_json_schema() -> dict[str, Any]:
    """The JSON Schema of the task format."""
    return JsonTask.model_json_schema()


def _path(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _schema_message(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        got = item.get("input")
        shown = "" if item["type"] == "missing" or isinstance(got, (dict, list)) else f" (got {got!r})"
        message = item["msg"].lower()
        if item["type"] == "string_pattern_mismatch":  # the only pattern: parameter names
            message = "expected a variable name starting with '?', e.g. '?x'"
        problems.append(f"{_path(item['loc'])}: {message}{shown}")
    return "the JSON task does not match the task schema: " + "; ".join(problems) + "."


def _one_expression(text: str) -> SList:
    root = read_sexpr(text)
    if len(root) != 1 or not isinstance(root[0], SList) or not root[0]:
        raise SchemaError(f"expected one parenthesised literal such as '(on a b)', got {text!r}.")
    return root


@overload
def _literal(ctx: _Ctx, text: str, scope: dict[str, str], where: str, atom_only: Literal[True]) -> Atom: ...
@overload
def _literal(ctx: _Ctx, text: str, scope: dict[str, str], where: str, atom_only: bool = False) -> Formula: ...
def _literal(ctx: _Ctx, text: str, scope: dict[str, str], where: str, atom_only: bool = False) -> Formula:
    """Parse one condition string with the PDDL checks; errors name the JSON field instead of a line."""
    try:
        root = _one_expression(text)
        if atom_only:
            return _atom(ctx, root[0], scope, where)
        formula = _formula(ctx, root, 0, scope, where)
    except TaskInputError as error:
        raise type(error)(f"{_named_once(where, error.message)} (in {text!r})", file=ctx.file) from None
    return formula


def _named_once(where: str, message: str) -> str:
    """`where: message`, unless the PDDL check already named the field (`goal[2]: predicate ...`, `init[6]
    mentions ...`): it was then named twice, `goal[2]: goal[2]: predicate ...`."""
    return message if message.startswith(where) else f"{where}: {message}"


def _effect_list(ctx: _Ctx, text: str, scope: dict[str, str], where: str) -> list[Effect]:
    """Parse one PDDL effect string (conditional, universal) into model effects."""
    out: list[Effect] = []
    costs: list[Any] = []
    try:
        _effects(ctx, _one_expression(text), 0, scope, where, (), TRUE, out, costs)
    except TaskInputError as error:
        raise type(error)(f"{_named_once(where, error.message)} (in {text!r})", file=ctx.file) from None
    if costs:
        raise UnsupportedFeatureError(
            f"{where}: give the action's cost in its 'cost' field, not as an effect (in {text!r}).", file=ctx.file
        )
    return out


def _conjunction(parts: list[Formula]) -> Formula:
    return And(tuple(parts)) if parts else TRUE


def task_from_json(text: str, file: str | None = None) -> Task:
    """Read a JSON task; invalid JSON or schema violations raise `SchemaError`, bad symbols the PDDL errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SchemaError(
            f"invalid JSON: {error.msg} at line {error.lineno}, column {error.colno}.", file=file, line=error.lineno
        ) from None
    try:
        spec = JsonTask.model_validate(_lower(data))
    except ValidationError as error:
        raise SchemaError(_schema_message(error), file=file) from None
    return _build(spec, file)


def _lower(value: Any) -> Any:
    """Names are case-insensitive as in PDDL (the literal parser lower-cases), so lower-case every string."""
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, list):
        return [_lower(v) for v in value]
    if isinstance(value, dict):
        return {k: _lower(v) for k, v in value.items()}
    return value


def _build(spec: JsonTask, file: str | None) -> Task:
    ctx = _Ctx(file)
    types = tuple((t.name, t.parent) for t in spec.types)
    ctx.types |= {name for name, _ in types}
    for i, (_name, parent) in enumerate(types):
        if parent not in ctx.types:
            raise SchemaError(f"types[{i}].parent: undefined type '{parent}'; declare it in 'types'.", file=file)
    _check_types(ctx, [(f"objects[{i}].type", o.type) for i, o in enumerate(spec.objects)])
    _check_unique_objects(spec.objects, file)
    predicates = []
    for i, p in enumerate(spec.predicates):
        types_used = [_either_type(ctx, f"predicates[{i}].parameters[{j}]", t) for j, t in enumerate(p.parameters)]
        ctx.predicates[p.name] = len(p.parameters)
        predicates.append(Predicate(p.name, tuple(Parameter(f"?x{j}", t) for j, t in enumerate(types_used))))
    actions = [_action(ctx, i, a) for i, a in enumerate(spec.actions)]
    axioms = [_derived(ctx, i, d) for i, d in enumerate(spec.derived)]
    ctx.objects = {o.name: o.type for o in spec.objects}
    init = frozenset(_literal(ctx, s, {}, f"init[{i}]", atom_only=True) for i, s in enumerate(spec.init))
    goal = _conjunction([_literal(ctx, s, {}, f"goal[{i}]") for i, s in enumerate(spec.goal)])
    costs = any(a.cost is not None for a in spec.actions)
    domain = Domain(
        spec.domain,
        (),
        types,
        (),
        tuple(predicates),
        (Predicate(TOTAL_COST),) if costs else (),
        tuple(actions),
        tuple(axioms),
    )
    problem = Problem(
        spec.name,
        spec.domain,
        tuple((o.name, o.type) for o in spec.objects),
        init,
        ((FunctionTerm(TOTAL_COST), 0.0),) if costs else (),
        goal,
        costs,
    )
    try:
        _check_axioms(ctx, domain, {a.head.predicate: 0 for a in axioms})
    except TaskInputError as error:
        raise type(error)(f"derived: {error.message}", file=file) from None
    used = Task(domain, problem).requirements_used() - {"either"}
    requirements = (":strips",) + tuple(sorted(used - {":strips"}))
    return task_with_texts(dataclasses.replace(domain, requirements=requirements), problem)


def _either_type(ctx: _Ctx, where: str, type_name: str) -> str:
    """A predicate argument type: a declared type, or '(either a b)' of declared types (normalised)."""
    if type_name.startswith("("):
        root = read_sexpr(type_name)
        inner = root[0] if len(root) == 1 and isinstance(root[0], SList) else None
        if not inner or inner[0] != EITHER or any(isinstance(t, SList) for t in inner[1:]) or len(inner) < 2:
            raise SchemaError(
                f"{where}: expected a type name or '(either <type> ...)', got {type_name!r}.", file=ctx.file
            )
        _check_types(ctx, [(where, t) for t in inner[1:]])
        return "(" + " ".join(inner) + ")"
    _check_types(ctx, [(where, type_name)])
    return type_name


def _derived(ctx: _Ctx, index: int, rule: JsonDerived) -> Axiom:
    where = f"derived[{index}]"
    _check_types(ctx, [(f"{where}.parameters[{j}].type", p.type) for j, p in enumerate(rule.parameters)])
    arity = ctx.predicates.get(rule.name)
    if arity is None:
        raise UndefinedSymbolError(
            f"{where}.name: derived predicate '{rule.name}' is not declared in 'predicates'.", file=ctx.file
        )
    if arity != len(rule.parameters):
        raise ArityError(
            f"{where}.parameters: predicate '{rule.name}' expects {arity} argument(s), got {len(rule.parameters)}.",
            file=ctx.file,
        )
    params = tuple(Parameter(p.name, p.type) for p in rule.parameters)
    body = _literal(ctx, rule.condition, {p.name: p.type for p in params}, f"{where}.condition")
    return Axiom(Atom(rule.name, tuple(p.name for p in params)), params, body)


def _check_types(ctx: _Ctx, uses: list[tuple[str, str]]) -> None:
    for where, type_name in uses:
        if type_name not in ctx.types:
            raise SchemaError(f"{where}: undefined type '{type_name}'; declare it in 'types'.", file=ctx.file)


def _check_unique_objects(objects: list[JsonObject], file: str | None) -> None:
    """Fast Downward's translator refuses an object listed twice; its ParseError surfaced as every delegate
    failing (exit 1) instead of bad input naming the entry."""
    seen: set[str] = set()
    for i, obj in enumerate(objects):
        if obj.name in seen:
            raise SchemaError(f"objects[{i}].name: object '{obj.name}' is listed twice; expected each once.", file=file)
        seen.add(obj.name)


def _action(ctx: _Ctx, index: int, action: JsonAction) -> ActionSchema:
    where = f"actions[{index}]"
    if action.cost is not None and not is_whole_cost(action.cost):  # 1e400 in the file is inf
        raise SchemaError(
            f"{where}.cost: expected a whole number >= 0, got {action.cost!r} (Fast Downward reads no other costs).",
            file=ctx.file,
        )
    _check_types(ctx, [(f"{where}.parameters[{j}].type", p.type) for j, p in enumerate(action.parameters)])
    scope = {p.name: p.type for p in action.parameters}
    if len(scope) != len(action.parameters):
        raise SchemaError(f"{where}.parameters: a variable name is used twice.", file=ctx.file)
    pre = [_literal(ctx, s, scope, f"{where}.preconditions[{j}]") for j, s in enumerate(action.preconditions)]
    effects = [
        Effect(_literal(ctx, s, scope, f"{where}.delete[{j}]", atom_only=True), True)
        for j, s in enumerate(action.delete)
    ]
    effects += [Effect(_literal(ctx, s, scope, f"{where}.add[{j}]", atom_only=True)) for j, s in enumerate(action.add)]
    for j, text in enumerate(action.effects):
        effects += _effect_list(ctx, text, scope, f"{where}.effects[{j}]")
    params = tuple(Parameter(p.name, p.type) for p in action.parameters)
    return ActionSchema(action.name, params, _conjunction(pre), tuple(effects), action.cost)


def task_to_json(task: Task) -> str:
    """Write a task as JSON: everything but domain constants and function-valued costs (numeric fluents), which
    raise `UnsupportedFeatureError`."""
    domain, problem = task.domain, task.problem
    if domain.constants:
        raise UnsupportedFeatureError("the JSON task format has no domain constants; use PDDL for this task.")
    actions = []
    for schema in domain.actions:
        if isinstance(schema.cost, FunctionTerm):
            raise UnsupportedFeatureError(
                f"action '{schema.name}' takes its cost from a numeric function; the "
                "JSON format has constant costs only."
            )
        plain = [e for e in schema.effects if e.condition == TRUE and not e.parameters]
        richer = [e for e in schema.effects if not (e.condition == TRUE and not e.parameters)]
        actions.append(
            {
                "name": schema.name,
                "parameters": [{"name": p.name, "type": p.type} for p in schema.parameters],
                "preconditions": _parts(schema.precondition),
                "add": [str(e.atom) for e in plain if not e.negated],
                "delete": [str(e.atom) for e in plain if e.negated],
                **({"effects": [effect_to_pddl(e) for e in richer]} if richer else {}),
                **({"cost": schema.cost} if schema.cost is not None else {}),
            }
        )
    data = {
        "domain": domain.name,
        "name": problem.name,
        "types": [{"name": t, "parent": p} for t, p in domain.types],
        "objects": [{"name": o, "type": t} for o, t in problem.objects],
        "predicates": [{"name": p.name, "parameters": [x.type for x in p.parameters]} for p in domain.predicates],
        "actions": actions,
        **(
            {
                "derived": [
                    {
                        "name": a.head.predicate,
                        "parameters": [{"name": p.name, "type": p.type} for p in a.parameters],
                        "condition": formula_to_pddl(a.body),
                    }
                    for a in domain.axioms
                ]
            }
            if domain.axioms
            else {}
        ),
        "init": [str(a) for a in sorted(problem.init)],
        "goal": _parts(problem.goal),
    }
    return json.dumps(data, indent=2) + "\n"


def _parts(formula: Formula) -> list[str]:
    """A condition as the list of its conjuncts (the JSON lists are conjunctions)."""
    parts = formula.parts if isinstance(formula, And) else (formula,)
    return [formula_to_pddl(part) for part in parts]
