"""The validator's compiled form of a task: closures built once per `Task`, so checking a plan does no tree walks.

`domains.validate` (the plan validator and simulator) asks this module for `_compiled(task)` and evaluates
everything through it. Compilation turns each schema's precondition and effects into closures (`_compile_formula`,
`_compile_effect`), each type into the set of its objects (subtypes and `either` unions included, `_Compiled.
of_type`), each action cost into a function of the arguments, and each derived predicate's rules into joins
(`domains.joins`), ordered by stratum so `_Compiled.closure` can extend a state with its derived atoms. The result
is cached per `Task` object for as long as the task lives (a weak reference drops the entry), because this runs on
the hot path: every plan any planner or LLM returns is validated.

Split out of `domains.validate` (which keeps the semantics, the `Validation` verdict, the messages and the public
functions); the names stay underscored because only the validator (and its tests) use them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from itertools import product

from domains.features import axiom_order, axiom_strata
from domains.joins import IndexedState, Join, conjuncts, negate, plan_join, variables
from domains.model import (
    OBJECT,
    And,
    Atom,
    Equals,
    Exists,
    Forall,
    Formula,
    FunctionTerm,
    Imply,
    Not,
    Or,
    Parameter,
    Task,
    either_types,
)

Env = Mapping[str, str]
# A compiled formula: does it hold in `state` (anything supporting `in`) under `env` (variable -> object)?
Test = Callable[[Collection[Atom], Env], bool]
# A compiled atom: the ground atom under `env`.
Builder = Callable[[Env], Atom]


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
            _Rule(_compile_join(axiom.parameters, axiom.body, compiled), _builder(axiom.head))
        )
    axiom_strata(task.domain)  # raises on a domain that cannot be stratified (the reader refuses those first)
    compiled.strata = [
        ([rule for p in component for rule in rules[p]], recursive) for component, recursive in axiom_order(task.domain)
    ]
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


def _quantified(
    parameters: tuple[Parameter, ...], compiled: _Compiled
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
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
    tests = [
        (frozenset(variables(p) & wanted), _compile_formula(p, compiled)) for p in parts if not isinstance(p, Atom)
    ]
    return plan_join(
        names,
        {p.name: compiled.of_type(p.type) for p in params},
        {p.name: compiled.domain(p.type) for p in params},
        generators,
        tests,
    )


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
