"""A JSON task format for agent runtimes that do not speak PDDL.

A task is typed objects, predicates, STRIPS-style actions (precondition literals, add and delete lists, an
optional cost), an initial state and a goal; literals are written as in PDDL (`"(on ?x ?y)"`,
`"(not (clear ?x))"`). The file is checked by a pydantic model (the schema `portfolio schema task` prints), then
every literal goes through the same checks as PDDL, so an unknown predicate is an `UndefinedSymbolError` here too.
The resulting `Task` gets its PDDL texts from the writer.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from domains.errors import SchemaError, TaskInputError, UnsupportedFeatureError
from domains.model import (
    OBJECT,
    TRUE,
    ActionSchema,
    And,
    Atom,
    Domain,
    Effect,
    Equals,
    Formula,
    FunctionTerm,
    Not,
    Parameter,
    Predicate,
    Problem,
    Task,
)
from domains.pddl import TOTAL_COST, _atom, _Ctx, _formula
from domains.sexpr import SList, read_sexpr
from domains.pddl_writer import formula_to_pddl, task_with_texts


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
    preconditions: list[str] = Field(default_factory=list,
                                     description="Literals that must hold, e.g. '(on ?x ?y)' or '(not (clear ?x))'.")
    add: list[str] = Field(default_factory=list, description="Atoms the action makes true, e.g. '(holding ?x)'.")
    delete: list[str] = Field(default_factory=list, description="Atoms the action makes false.")
    cost: float | None = Field(None, ge=0, description="Non-negative action cost; omit for unit-cost tasks.")


class JsonTask(_Strict):
    """A planning task: a domain (types, predicates, actions) and a problem (objects, init, goal)."""

    domain: str = Field("domain", description="Domain name.")
    name: str = Field("task", description="Problem name.")
    types: list[JsonType] = Field(default_factory=list)
    objects: list[JsonObject] = Field(default_factory=list)
    predicates: list[JsonPredicate]
    actions: list[JsonAction]
    init: list[str] = Field(default_factory=list, description="Atoms true in the initial state, e.g. '(on a b)'.")
    goal: list[str] = Field(description="Literals that must hold at the end.")


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


def _literal(ctx: _Ctx, text: str, scope: dict[str, str], where: str, atom_only: bool = False) -> Formula:
    """Parse one literal string with the PDDL checks; errors name the JSON field instead of a line."""
    try:
        root = read_sexpr(text)
        if len(root) != 1 or not isinstance(root[0], SList) or not root[0]:
            raise SchemaError(f"expected one parenthesised literal such as '(on a b)', got {text!r}.")
        if atom_only:
            return _atom(ctx, root[0], scope, where)
        formula = _formula(ctx, root, 0, scope, where)
    except TaskInputError as error:
        raise type(error)(f"{where}: {error.message} (in {text!r})", file=ctx.file) from None
    if not _is_literal(formula):
        raise UnsupportedFeatureError(f"{where}: expected an atom, an equality '(= ?x ?y)' or the 'not' of one, "
                                      f"got {text!r}; use PDDL for richer conditions.", file=ctx.file)
    return formula


def _is_literal(formula: Formula) -> bool:
    if isinstance(formula, Not):
        formula = formula.arg
    return isinstance(formula, (Atom, Equals))


def _conjunction(parts: list[Formula]) -> Formula:
    return And(tuple(parts)) if parts else TRUE


def task_from_json(text: str, file: str | None = None) -> Task:
    """Read a JSON task; invalid JSON or schema violations raise `SchemaError`, bad symbols the PDDL errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SchemaError(f"invalid JSON: {error.msg} at line {error.lineno}, column {error.colno}.",
                          file=file, line=error.lineno) from None
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
    for i, (name, parent) in enumerate(types):
        if parent not in ctx.types:
            raise SchemaError(f"types[{i}].parent: undefined type '{parent}'; declare it in 'types'.", file=file)
    _check_types(ctx, [(f"objects[{i}].type", o.type) for i, o in enumerate(spec.objects)])
    predicates = []
    for i, p in enumerate(spec.predicates):
        _check_types(ctx, [(f"predicates[{i}].parameters[{j}]", t) for j, t in enumerate(p.parameters)])
        ctx.predicates[p.name] = len(p.parameters)
        predicates.append(Predicate(p.name, tuple(Parameter(f"?x{j}", t) for j, t in enumerate(p.parameters))))
    actions = [_action(ctx, i, a) for i, a in enumerate(spec.actions)]
    ctx.objects = {o.name: o.type for o in spec.objects}
    init = frozenset(_literal(ctx, s, {}, f"init[{i}]", atom_only=True) for i, s in enumerate(spec.init))
    goal = _conjunction([_literal(ctx, s, {}, f"goal[{i}]") for i, s in enumerate(spec.goal)])
    costs = any(a.cost is not None for a in spec.actions)
    requirements = [":strips"] + ([":typing"] if types or any(o.type != OBJECT for o in spec.objects) else [])
    conditions = [part for a in actions for part in a.precondition.parts] + list(goal.parts)  # type: ignore
    if any(isinstance(part, Not) for part in conditions):
        requirements.append(":negative-preconditions")
    if any(isinstance(part, Equals) or isinstance(part, Not) and isinstance(part.arg, Equals) for part in conditions):
        requirements.append(":equality")
    if costs:
        requirements.append(":action-costs")
    domain = Domain(spec.domain, tuple(requirements), types, (), tuple(predicates),
                    (Predicate(TOTAL_COST),) if costs else (), tuple(actions))
    problem = Problem(spec.name, spec.domain, tuple((o.name, o.type) for o in spec.objects), init,
                      ((FunctionTerm(TOTAL_COST), 0.0),) if costs else (), goal, costs)
    return task_with_texts(domain, problem)


def _check_types(ctx: _Ctx, uses: list[tuple[str, str]]) -> None:
    for where, type_name in uses:
        if type_name not in ctx.types:
            raise SchemaError(f"{where}: undefined type '{type_name}'; declare it in 'types'.", file=ctx.file)


def _action(ctx: _Ctx, index: int, action: JsonAction) -> ActionSchema:
    where = f"actions[{index}]"
    _check_types(ctx, [(f"{where}.parameters[{j}].type", p.type) for j, p in enumerate(action.parameters)])
    scope = {p.name: p.type for p in action.parameters}
    if len(scope) != len(action.parameters):
        raise SchemaError(f"{where}.parameters: a variable name is used twice.", file=ctx.file)
    pre = [_literal(ctx, s, scope, f"{where}.preconditions[{j}]") for j, s in enumerate(action.preconditions)]
    effects = [Effect(_literal(ctx, s, scope, f"{where}.delete[{j}]", atom_only=True), True)  # type: ignore[arg-type]
               for j, s in enumerate(action.delete)]
    effects += [Effect(_literal(ctx, s, scope, f"{where}.add[{j}]", atom_only=True))  # type: ignore[arg-type]
                for j, s in enumerate(action.add)]
    params = tuple(Parameter(p.name, p.type) for p in action.parameters)
    return ActionSchema(action.name, params, _conjunction(pre), tuple(effects), action.cost)


def task_to_json(task: Task) -> str:
    """Write a STRIPS task (literal preconditions and goal, plain add/delete effects, constant costs) as JSON;
    anything richer raises `UnsupportedFeatureError`."""
    domain, problem = task.domain, task.problem
    if domain.constants:
        raise UnsupportedFeatureError("the JSON task format has no domain constants; use PDDL for this task.")
    actions = []
    for schema in domain.actions:
        effects = schema.effects
        if any(e.condition != TRUE or e.parameters for e in effects) or isinstance(schema.cost, FunctionTerm):
            raise UnsupportedFeatureError(f"action '{schema.name}' has conditional, quantified or "
                                          "function-valued effects; the JSON format is STRIPS only.")
        actions.append({
            "name": schema.name,
            "parameters": [{"name": p.name, "type": p.type} for p in schema.parameters],
            "preconditions": _literals(schema.precondition, f"the precondition of '{schema.name}'"),
            "add": [str(e.atom) for e in effects if not e.negated],
            "delete": [str(e.atom) for e in effects if e.negated],
            **({"cost": schema.cost} if schema.cost is not None else {}),
        })
    data = {
        "domain": domain.name,
        "name": problem.name,
        "types": [{"name": t, "parent": p} for t, p in domain.types],
        "objects": [{"name": o, "type": t} for o, t in problem.objects],
        "predicates": [{"name": p.name, "parameters": [x.type for x in p.parameters]} for p in domain.predicates],
        "actions": actions,
        "init": [str(a) for a in sorted(problem.init)],
        "goal": _literals(problem.goal, "the goal"),
    }
    return json.dumps(data, indent=2) + "\n"


def _literals(formula: Formula, what: str) -> list[str]:
    parts = formula.parts if isinstance(formula, And) else (formula,)
    result = []
    for part in parts:
        if _is_literal(part):
            result.append(formula_to_pddl(part))
        else:
            raise UnsupportedFeatureError(f"{what} is not a conjunction of literals; the JSON format is STRIPS only.")
    return result
