"""A sound plan validator and simulator on the lifted task model, independent of any planner.

Every plan a planner (or an LLM) returns is checked here, and the diagnosis is fed back as a critique, so each
failure names the step, the grounded action and the exact literals that do not hold, in PDDL form.

Semantics are PDDL's: closed world; an action's effects (conditions of conditional effects included) are all
evaluated in the state before the action; deletes are applied before adds, so an atom both deleted and added
ends up true; quantifiers and forall-effects range over the objects of the parameter's type (subtypes included).
Derived predicates (PDDL 2.2 axioms) are never stored in a state: before any condition is evaluated, the state is
extended with every derived atom: the derived predicates' dependency components in order (`domains.features.
axiom_order`; the domain must stratify), each to its least fixpoint (one pass when not recursive) with the
components it depends on complete, so a negation only ever looks at finished predicates. Tasks without axioms
skip this entirely; with axioms, quantifiers are evaluated as joins on an indexed state (`domains.joins`).

This runs on the hot path, so each task is compiled once (schema preconditions and effects into closures, types
into object sets) and the compiled form is cached per `Task` object for as long as the task lives.
"""

from __future__ import annotations

import difflib
import weakref
from dataclasses import dataclass, field
from itertools import product
from typing import Callable, Collection, Mapping

from domains.features import axiom_order, axiom_strata
from domains.joins import IndexedState, Join, conjuncts, negate, plan_join, variables
from domains.pddl_writer import formula_to_pddl
from domains.model import (
    OBJECT,
    Atom,
    Equals,
    Exists,
    Forall,
    FunctionTerm,
    GroundAction,
    Imply,
    Not,
    Or,
    And,
    Formula,
    Parameter,
    Plan,
    State,
    Task,
    either_types,
)

Env = Mapping[str, str]
# A compiled formula: does it hold in `state` (anything supporting `in`) under `env` (variable -> object)?
Test = Callable[[Collection[Atom], Env], bool]
# A compiled atom: the ground atom under `env`.
Builder = Callable[[Env], Atom]

PROBLEMS = ("unknown-action", "wrong-arity", "unknown-object", "wrong-type", "precondition", "goal")


@dataclass(frozen=True)
class Validation:
    """The verdict on one plan.

    `failed_step` is 1-based, the same number the message shows (`plan[failed_step - 1]` is the offending
    action); it is None when the plan is valid or when every step applied but the goal was not reached.
    `final_state` is the state after the last step that applied; `cost` is the cost of those steps.
    `missing` lists the grounded literals that failed (precondition or goal), in PDDL form.
    """

    ok: bool
    final_state: State
    cost: float
    failed_step: int | None = None
    problem: str = ""
    message: str = ""
    missing: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------
# Compilation


@dataclass
class _Effect:
    names: tuple[str, ...]  # forall variables
    domains: tuple[tuple[str, ...], ...]  # their objects
    condition: Test | None
    build: Builder
    negated: bool


@dataclass
class _Schema:
    names: tuple[str, ...]
    types: tuple[str, ...]
    precondition: Test
    effects: tuple[_Effect, ...]
    cost: Callable[[tuple[str, ...]], float]


@dataclass
class _Rule:
    bindings: Join  # every binding of the head's variables (and the body's existentials) that makes the body true
    build: Builder


@dataclass
class _Compiled:
    objects: dict[str, str]
    members: dict[str, frozenset[str]]  # type -> objects of that type or a subtype
    schemas: dict[str, _Schema]
    goal: Test
    # Derived predicates' rules, component by component (dependencies first), with whether the component is
    # recursive: a non-recursive one is complete after one pass, a recursive one is iterated to its fixpoint.
    strata: list[tuple[list[_Rule], bool]] = field(default_factory=list)

    def closure(self, state: Collection[Atom]) -> Collection[Atom]:
        """`state` plus every derived atom that holds in it (the state itself when there are no axioms)."""
        if not self.strata:
            return state
        full = IndexedState(state)
        for rules, recursive in self.strata:
            changed = True
            while changed:  # least fixpoint of this component; the ones it depends on are complete
                changed = False
                for rule in rules:
                    for env in rule.bindings(full, {}):
                        changed |= full.add(rule.build(env))
                changed &= recursive
        return full

    def of_type(self, type_name: str) -> frozenset[str]:
        found = self.members.get(type_name)
        if found is None:
            union = either_types(type_name)
            if union is not None:
                found = frozenset().union(*(self.of_type(member) for member in union))
            else:  # an undeclared type: only objects declared with exactly that name
                found = frozenset(o for o, t in self.objects.items() if t == type_name)
            self.members[type_name] = found
        return found

    def domain(self, type_name: str) -> tuple[str, ...]:
        return tuple(sorted(self.of_type(type_name)))


_CACHE: dict[int, tuple[weakref.ref, _Compiled]] = {}


def _compiled(task: Task) -> _Compiled:
    key = id(task)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is task:
        return hit[1]
    compiled = _compile_task(task)

    def forget(ref: weakref.ref, key: int = key) -> None:
        entry = _CACHE.get(key)
        if entry is not None and entry[0] is ref:
            del _CACHE[key]

    _CACHE[key] = (weakref.ref(task, forget), compiled)
    return compiled


def _type_members(task: Task) -> dict[str, frozenset[str]]:
    parents = task.type_parents()
    objects = task.objects()
    members: dict[str, set[str]] = {OBJECT: set(objects)}
    for obj, type_name in objects.items():
        current: str | None = type_name
        seen: set[str] = set()
        while current is not None and current not in seen:
            members.setdefault(current, set()).add(obj)
            seen.add(current)
            current = parents.get(current)
    for type_name in parents:
        members.setdefault(type_name, set())
    return {t: frozenset(objs) for t, objs in members.items()}


def _compile_task(task: Task) -> _Compiled:
    compiled = _Compiled(task.objects(), _type_members(task), {}, lambda s, e: True)
    numeric = dict(task.problem.numeric_init)
    with_costs = task.has_action_costs()
    for schema in task.domain.actions:
        names = tuple(p.name for p in schema.parameters)
        compiled.schemas[schema.name] = _Schema(
            names=names,
            types=tuple(p.type for p in schema.parameters),
            precondition=_compile_formula(schema.precondition, compiled),
            effects=tuple(_compile_effect(e, compiled) for e in schema.effects),
            cost=_compile_cost(schema.cost, names, numeric, with_costs),
        )
    compiled.goal = _compile_formula(task.problem.goal, compiled)
    rules: dict[str, list[_Rule]] = {}
    for axiom in task.domain.axioms:
        rules.setdefault(axiom.head.predicate, []).append(
            _Rule(_compile_join(axiom.parameters, axiom.body, compiled), _builder(axiom.head)))
    axiom_strata(task.domain)  # raises on a domain that cannot be stratified (the reader refuses those first)
    compiled.strata = [([rule for p in component for rule in rules[p]], recursive)
                       for component, recursive in axiom_order(task.domain)]
    return compiled


def _compile_cost(
    cost: float | FunctionTerm | None, names: tuple[str, ...], numeric: dict, with_costs: bool
) -> Callable[[tuple[str, ...]], float]:
    """Same numbers as `domains.model.action_cost`, without rebuilding the fluent table on every call."""
    if not with_costs:
        return lambda args: 1.0
    if cost is None:
        return lambda args: 0.0
    if isinstance(cost, (int, float)):
        value = float(cost)
        return lambda args: value
    positions = {n: i for i, n in enumerate(names)}
    fname, fargs = cost.name, cost.args

    def evaluate(args: tuple[str, ...]) -> float:
        key = FunctionTerm(fname, tuple(args[positions[a]] if a in positions else a for a in fargs))
        return numeric.get(key, 0.0)

    return evaluate


def _builder(atom: Atom) -> Builder:
    predicate, args = atom.predicate, atom.args
    if not any(a.startswith("?") for a in args):
        return lambda env: atom
    if len(args) == 1:
        (a,) = args
        return lambda env: Atom(predicate, (env.get(a, a),))
    if len(args) == 2:
        a, b = args
        return lambda env: Atom(predicate, (env.get(a, a), env.get(b, b)))
    return lambda env: Atom(predicate, tuple([env.get(x, x) for x in args]))


def _quantified(parameters: tuple[Parameter, ...], compiled: _Compiled) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    return tuple(p.name for p in parameters), tuple(compiled.domain(p.type) for p in parameters)


def _compile_formula(formula: Formula, compiled: _Compiled) -> Test:
    """Turn a formula into a closure; the structure is walked once here instead of on every evaluation."""
    if isinstance(formula, Atom):
        if not any(a.startswith("?") for a in formula.args):
            ground = formula
            return lambda state, env: ground in state
        build = _builder(formula)
        return lambda state, env: build(env) in state
    if isinstance(formula, Not):
        inner = _compile_formula(formula.arg, compiled)
        return lambda state, env: not inner(state, env)
    if isinstance(formula, And):
        parts = tuple(_compile_formula(p, compiled) for p in formula.parts)
        if not parts:
            return lambda state, env: True
        if len(parts) == 1:
            return parts[0]
        return lambda state, env: all(p(state, env) for p in parts)
    if isinstance(formula, Or):
        parts = tuple(_compile_formula(p, compiled) for p in formula.parts)
        return lambda state, env: any(p(state, env) for p in parts)
    if isinstance(formula, Imply):
        condition = _compile_formula(formula.condition, compiled)
        consequence = _compile_formula(formula.consequence, compiled)
        return lambda state, env: not condition(state, env) or consequence(state, env)
    if isinstance(formula, Equals):
        left, right = formula.left, formula.right
        return lambda state, env: env.get(left, left) == env.get(right, right)
    if isinstance(formula, (Exists, Forall)):
        names, domains = _quantified(formula.parameters, compiled)
        body = _compile_formula(formula.body, compiled)
        want = isinstance(formula, Exists)
        # On indexed states (tasks with derived predicates) the quantifier is a join: forall x: B is
        # "no binding of x satisfies not B".
        witness = _compile_join(formula.parameters, formula.body if want else negate(formula.body), compiled)

        def quantifier(state: Collection[Atom], env: Env) -> bool:
            if type(state) is IndexedState:
                found = next(witness(state, env), None) is not None
                return found if want else not found
            for combo in product(*domains):
                if body(state, {**env, **dict(zip(names, combo))}) == want:
                    return want
            return not want

        return quantifier
    raise TypeError(f"not a formula: {formula!r}")


def _compile_join(parameters: tuple[Parameter, ...], body: Formula, compiled: _Compiled) -> Join:
    params, parts = conjuncts(parameters, body)
    names = tuple(p.name for p in params)
    wanted = set(names)
    generators = [p for p in parts if isinstance(p, Atom)]
    tests = [(frozenset(variables(p) & wanted), _compile_formula(p, compiled)) for p in parts
             if not isinstance(p, Atom)]
    return plan_join(names, {p.name: compiled.of_type(p.type) for p in params},
                     {p.name: compiled.domain(p.type) for p in params}, generators, tests)


def _compile_effect(effect, compiled: _Compiled) -> _Effect:
    names, domains = _quantified(effect.parameters, compiled)
    condition = effect.condition
    trivial = isinstance(condition, And) and not condition.parts
    return _Effect(
        names=names,
        domains=domains,
        condition=None if trivial else _compile_formula(condition, compiled),
        build=_builder(effect.atom),
        negated=effect.negated,
    )


# ---------------------------------------------------------------------------------------------------------
# Printing grounded formulas (for messages)


def _ground(formula: Formula, env: Env) -> str:
    """PDDL text of `formula` with the variables bound in `env` replaced by their objects."""
    return formula_to_pddl(formula, env)


def _failures(formula: Formula, state: Collection[Atom], env: Env, compiled: _Compiled) -> list[str]:
    """The smallest grounded pieces of `formula` that do not hold: the literals of a conjunction, the failing
    instances of a universal; a disjunction, existential or implication is reported whole."""
    if isinstance(formula, And):
        out: list[str] = []
        for part in formula.parts:
            out.extend(_failures(part, state, env, compiled))
        return out
    if isinstance(formula, Forall):
        names, domains = _quantified(formula.parameters, compiled)
        out = []
        for combo in product(*domains):
            inner = {**env, **dict(zip(names, combo))}
            for failure in _failures(formula.body, state, inner, compiled):
                if failure not in out:
                    out.append(failure)
        return out
    if _compile_formula(formula, compiled)(state, env):
        return []
    return [_ground(formula, env)]


# ---------------------------------------------------------------------------------------------------------
# Public API


def holds(formula: Formula, state: Collection[Atom], task: Task, binding: Env | None = None) -> bool:
    """True when `formula` holds in `state` (closed world) with free variables bound by `binding`."""
    compiled = _compiled(task)
    return _compile_formula(formula, compiled)(compiled.closure(state), binding or {})


def check_action(task: Task, action: GroundAction) -> str | None:
    """None when `action` names a schema of the task with the right number of arguments, each a known object of
    the parameter's type; otherwise what is wrong, with close names suggested for typos."""
    return _check(_compiled(task), action)[1]


def _check(compiled: _Compiled, action: GroundAction) -> tuple[str, str | None]:
    """(problem kind, message) for an ill-formed action, ("", None) for a well-formed one."""
    schema = compiled.schemas.get(action.name)
    if schema is None:
        close = difflib.get_close_matches(action.name, list(compiled.schemas), n=3, cutoff=0.6)
        hint = f"; did you mean {_or_list(close)}?" if close else f"; known actions: {', '.join(sorted(compiled.schemas))}"
        return "unknown-action", f"unknown action '{action.name}'{hint}"
    if len(action.args) != len(schema.names):
        signature = " ".join(f"{n} - {t}" for n, t in zip(schema.names, schema.types))
        return "wrong-arity", (
            f"action '{action.name}' expects {len(schema.names)} argument{'s' if len(schema.names) != 1 else ''} "
            f"({signature}), got {len(action.args)}"
        )
    for position, (arg, name, type_name) in enumerate(zip(action.args, schema.names, schema.types), start=1):
        if arg not in compiled.objects:
            close = difflib.get_close_matches(arg, list(compiled.objects), n=3, cutoff=0.6)
            hint = f"; did you mean {_or_list(close)}?" if close else ""
            return "unknown-object", f"unknown object '{arg}' (argument {position} of {action.name}){hint}"
        if arg not in compiled.of_type(type_name):
            return "wrong-type", (
                f"object '{arg}' is of type '{compiled.objects[arg]}', but argument {position} ({name}) of "
                f"{action.name} must be of type '{type_name}'"
            )
    return "", None


def _or_list(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _env(schema: _Schema, action: GroundAction) -> dict[str, str]:
    return dict(zip(schema.names, action.args))


def _schema_for(compiled: _Compiled, action: GroundAction) -> _Schema:
    kind, message = _check(compiled, action)
    if message is not None:
        raise ValueError(f"{action}: {message}")
    return compiled.schemas[action.name]


def applicable(task: Task, state: Collection[Atom], action: GroundAction) -> bool:
    """True when `action` is well-formed and its precondition holds in `state`."""
    compiled = _compiled(task)
    if _check(compiled, action)[1] is not None:
        return False
    schema = compiled.schemas[action.name]
    return schema.precondition(compiled.closure(state), _env(schema, action))


def unsatisfied_preconditions(task: Task, state: Collection[Atom], action: GroundAction) -> list[str]:
    """The grounded precondition literals of `action` that do not hold in `state`, e.g. ["(clear b)",
    "(not (holding a))"]; empty when the action is applicable. Raises ValueError for an ill-formed action."""
    compiled = _compiled(task)
    schema = _schema_for(compiled, action)
    env = _env(schema, action)
    state = compiled.closure(state)
    if schema.precondition(state, env):
        return []
    precondition = next(s for s in task.domain.actions if s.name == action.name).precondition
    return _failures(precondition, state, env, compiled)


def _effects(schema: _Schema, state: Collection[Atom], env: Env) -> tuple[list[Atom], list[Atom]]:
    """(adds, deletes) of one grounded action, every condition evaluated in `state` (the old state)."""
    adds: list[Atom] = []
    deletes: list[Atom] = []
    for effect in schema.effects:
        target = deletes if effect.negated else adds
        if effect.names:
            for combo in product(*effect.domains):
                inner = {**env, **dict(zip(effect.names, combo))}
                if effect.condition is None or effect.condition(state, inner):
                    target.append(effect.build(inner))
        elif effect.condition is None or effect.condition(state, env):
            target.append(effect.build(env))
    return adds, deletes


def apply(task: Task, state: State, action: GroundAction) -> State:
    """The state after `action` (PDDL semantics). Does not check the precondition: use `applicable` first.
    Raises ValueError for an ill-formed action."""
    compiled = _compiled(task)
    schema = _schema_for(compiled, action)
    adds, deletes = _effects(schema, compiled.closure(state), _env(schema, action))
    return (state.difference(deletes)).union(adds)


def unmet_goals(task: Task, state: Collection[Atom]) -> list[str]:
    """The grounded goal literals that do not hold in `state`; empty when the goal is reached."""
    compiled = _compiled(task)
    state = compiled.closure(state)
    if compiled.goal(state, {}):
        return []
    return _failures(task.problem.goal, state, {}, compiled)


def goal_reached(task: Task, state: Collection[Atom]) -> bool:
    compiled = _compiled(task)
    return compiled.goal(compiled.closure(state), {})


def validate_plan(task: Task, plan: Plan, init: State | None = None) -> Validation:
    """Simulate `plan` from `init` (the task's initial state by default) and say whether it reaches the goal;
    on failure, which step failed, why, and the literals that were missing."""
    compiled = _compiled(task)
    state = set(task.problem.init if init is None else init)
    cost = 0.0
    for number, action in enumerate(plan, start=1):
        kind, message = _check(compiled, action)
        if message is not None:
            return Validation(False, frozenset(state), cost, number, kind, f"step {number} {action}: {message}")
        schema = compiled.schemas[action.name]
        env = dict(zip(schema.names, action.args))
        full = compiled.closure(state)
        if not schema.precondition(full, env):
            precondition = next(s for s in task.domain.actions if s.name == action.name).precondition
            missing = _failures(precondition, full, env, compiled)
            noun = "precondition" if len(missing) == 1 else "preconditions"
            verb = "does" if len(missing) == 1 else "do"
            text = f"step {number} {action}: {noun} {', '.join(missing)} {verb} not hold"
            return Validation(False, frozenset(state), cost, number, "precondition", text, missing)
        adds, deletes = _effects(schema, full, env)
        state.difference_update(deletes)
        state.update(adds)
        cost += schema.cost(action.args)
    final = frozenset(state)
    full = compiled.closure(state)
    if not compiled.goal(full, {}):
        missing = _failures(task.problem.goal, full, {}, compiled)
        verb = "does" if len(missing) == 1 else "do"
        text = f"goal not reached after {len(plan)} step{'s' if len(plan) != 1 else ''}: {', '.join(missing)} {verb} not hold"
        return Validation(False, final, cost, None, "goal", text, missing)
    return Validation(True, final, cost)
