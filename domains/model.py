"""The planning task model every other part of the project speaks.

A `Task` is a lifted PDDL domain plus one problem: typed objects, predicates, derived predicates (axioms), action
schemas with preconditions, (conditional, quantified) effects and costs, an initial state and a goal. This is the
fragment Fast Downward's translator accepts; `Task.requirements_used` says which parts of it a task really uses, so
a planner that handles less (pyperplan: STRIPS only) can decline a task instead of failing on it. PDDL files, the JSON
task format and unified-planning `Problem` objects are all read into this model; the validator simulates plans
on it; the PDDL writer turns it back into text for the planners.

Everything here is an immutable value, so a task can be hashed, cached and shared across threads.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

# The formula language the model is written in; these names are importable from here too, as they always were.
from domains.formulas import (
    OBJECT,
    TRUE,
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
    either_types,
)

Cost = float | FunctionTerm


@dataclass(frozen=True)
class Effect:
    """One literal an action makes true (`negated=False`) or false, possibly for all `parameters` and only
    when `condition` holds in the state before the action."""

    atom: Atom
    negated: bool = False
    condition: Formula = TRUE
    parameters: tuple[Parameter, ...] = ()


@dataclass(frozen=True)
class ActionSchema:
    name: str
    parameters: tuple[Parameter, ...]
    precondition: Formula = TRUE
    effects: tuple[Effect, ...] = ()
    cost: Cost | None = None  # None: the action adds nothing to total-cost


@dataclass(frozen=True)
class Axiom:
    """A derived predicate's rule (`:derived`): `head` (its arguments are `parameters`) holds in every state
    where `body` holds. Derived atoms are never in a state: they are computed from it (see `domains.validate`)."""

    head: Atom
    parameters: tuple[Parameter, ...]
    body: Formula


@dataclass(frozen=True)
class Predicate:
    name: str
    parameters: tuple[Parameter, ...] = ()

    @property
    def arity(self) -> int:
        return len(self.parameters)


@dataclass(frozen=True)
class Domain:
    name: str
    requirements: tuple[str, ...] = ()
    types: tuple[tuple[str, str], ...] = ()  # (type, parent type) pairs
    constants: tuple[tuple[str, str], ...] = ()  # (object, type) pairs
    predicates: tuple[Predicate, ...] = ()
    functions: tuple[Predicate, ...] = ()  # numeric fluents, used for costs only
    actions: tuple[ActionSchema, ...] = ()
    axioms: tuple[Axiom, ...] = ()

    @property
    def derived_predicates(self) -> frozenset[str]:
        return frozenset(axiom.head.predicate for axiom in self.axioms)

    def action(self, name: str) -> ActionSchema | None:
        for schema in self.actions:
            if schema.name == name:
                return schema
        return None

    def predicate(self, name: str) -> Predicate | None:
        for predicate in self.predicates:
            if predicate.name == name:
                return predicate
        return None


@dataclass(frozen=True)
class Problem:
    name: str
    domain_name: str
    objects: tuple[tuple[str, str], ...] = ()  # (object, type) pairs
    init: frozenset[Atom] = frozenset()
    numeric_init: tuple[tuple[FunctionTerm, float], ...] = ()
    goal: Formula = TRUE
    minimize_total_cost: bool = False


@dataclass(frozen=True)
class GroundAction:
    """An action schema applied to objects: one step of a plan."""

    name: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "(" + " ".join((self.name, *self.args)) + ")"


Plan = list[GroundAction]
State = frozenset[Atom]


@dataclass(frozen=True)
class Task:
    """A domain and a problem, plus the PDDL texts they were read from when they came from PDDL.

    The texts let Fast Downward see exactly what the user wrote (it accepts some files other parsers reject);
    tasks from JSON or Python get texts from the PDDL writer.
    """

    domain: Domain
    problem: Problem
    domain_pddl: str = field(default="", compare=False, repr=False)
    problem_pddl: str = field(default="", compare=False, repr=False)

    @property
    def init(self) -> State:
        """The problem's initial state (`problem.init`): the default `init` of `Planner.plan`."""
        return self.problem.init

    @cached_property
    def fingerprint(self) -> str:
        """Content hash of the task as the planners see it: equal texts, equal fingerprint. Computed once per
        task object: the planner keys caches and trace runs by it on every call."""
        digest = hashlib.sha256()
        digest.update(self.domain_pddl.encode())
        digest.update(b"\0")
        digest.update(self.problem_pddl.encode())
        return digest.hexdigest()[:16]

    @cached_property
    def domain_fingerprint(self) -> str:
        """Content hash of the domain text alone: the problems of one domain file share it, so what was learned
        on some of them (which search configuration solves them first) applies to the next one."""
        return hashlib.sha256(self.domain_pddl.encode()).hexdigest()[:16]

    def objects(self) -> dict[str, str]:
        """Every object the task knows (domain constants and problem objects) with its declared type."""
        return dict(self._objects)

    @cached_property
    def _objects(self) -> dict[str, str]:
        return dict(self.domain.constants) | dict(self.problem.objects)

    @cached_property
    def numeric_values(self) -> dict[FunctionTerm, float]:
        """The problem's numeric facts (cost functions) by term."""
        return dict(self.problem.numeric_init)

    def type_parents(self) -> dict[str, str]:
        return dict(self.domain.types)

    def is_of_type(self, obj: str, wanted: str) -> bool:
        """True when `obj` is declared of type `wanted` or of one of its subtypes (of one of the members of an
        `(either ...)` type)."""
        members = either_types(wanted)
        if members is not None:
            return any(self.is_of_type(obj, member) for member in members)
        if wanted == OBJECT:
            return obj in self._objects
        parents = dict(self.domain.types)
        current: str | None = self._objects.get(obj)
        seen: set[str] = set()
        while current is not None and current not in seen:
            if current == wanted:
                return True
            seen.add(current)
            current = parents.get(current)
        return False

    def objects_of_type(self, wanted: str) -> list[str]:
        return sorted(obj for obj in self._objects if self.is_of_type(obj, wanted))

    def has_action_costs(self) -> bool:
        return self._has_action_costs

    @cached_property
    def _has_action_costs(self) -> bool:
        return any(schema.cost is not None for schema in self.domain.actions)

    def requirements_used(self) -> frozenset[str]:
        """The PDDL requirements this task really uses (whatever its `:requirements` declares), by their PDDL
        names: `:strips`, `:typing`, `:negative-preconditions`, `:disjunctive-preconditions`, `:equality`,
        `:existential-preconditions`, `:universal-preconditions`, `:conditional-effects`, `:derived-predicates`,
        `:action-costs`; plus `either` when a predicate declares an `(either ...)` argument type."""
        return self._requirements_used

    @cached_property
    def _requirements_used(self) -> frozenset[str]:
        return requirements_used(self)

    @property
    def is_strips(self) -> bool:
        """True when the task is STRIPS (typing and action costs allowed): positive conjunctive preconditions and
        goal, plain add and delete effects, no derived predicates."""
        return self._requirements_used <= STRIPS_FRAGMENT

    @property
    def has_axioms(self) -> bool:
        return bool(self.domain.axioms)


STRIPS_FRAGMENT = frozenset({":strips", ":typing", ":action-costs"})


def is_whole_cost(value: float) -> bool:
    """A cost Fast Downward's translator reads: a whole number >= 0 (a PDDL or JSON task's, one rule for both
    readers). Anything else was its ParseError (every delegate failed), and an infinite cost made it call the
    task unsolvable."""
    return math.isfinite(value) and value >= 0 and value.is_integer()


def action_cost(task: Task, action: GroundAction) -> float:
    """The cost of one grounded action: its schema's constant or the value of its cost function (1 without
    costs, as PDDL planners count steps then)."""
    if not task.has_action_costs():
        return 1.0
    schema = task.domain.action(action.name)
    if schema is None or schema.cost is None:
        return 0.0
    if isinstance(schema.cost, (int, float)):
        return float(schema.cost)
    binding = {p.name: a for p, a in zip(schema.parameters, action.args)}
    term = FunctionTerm(schema.cost.name, tuple(binding.get(a, a) for a in schema.cost.args))
    return task.numeric_values.get(term, 0.0)


def plan_cost(task: Task, plan: Plan) -> float:
    return sum((action_cost(task, step) for step in plan), 0.0)


# -- what a task uses (here, not in `features`, which builds on this module: `Task.requirements_used` needs it) --


def _formula_features(formula: Formula, positive: bool = True) -> Iterator[str]:
    if isinstance(formula, Atom):
        if not positive:
            yield ":negative-preconditions"
    elif isinstance(formula, Not):
        yield from _formula_features(formula.arg, not positive)
    elif isinstance(formula, And):
        if not positive and len(formula.parts) > 1:
            yield ":disjunctive-preconditions"
        for part in formula.parts:
            yield from _formula_features(part, positive)
    elif isinstance(formula, Or):
        if positive and len(formula.parts) > 1:
            yield ":disjunctive-preconditions"
        for part in formula.parts:
            yield from _formula_features(part, positive)
    elif isinstance(formula, Imply):
        yield ":disjunctive-preconditions"
        yield from _formula_features(formula.condition, not positive)
        yield from _formula_features(formula.consequence, positive)
    elif isinstance(formula, Equals):
        yield ":equality"
        if not positive:
            yield ":negative-preconditions"
    elif isinstance(formula, (Exists, Forall)):
        existential = isinstance(formula, Exists) == positive
        yield ":existential-preconditions" if existential else ":universal-preconditions"
        yield from _formula_features(formula.body, positive)


def requirements_used(task: Task) -> frozenset[str]:
    """See `Task.requirements_used`."""
    domain, problem = task.domain, task.problem
    used = {":strips"}
    typed = [t for _, t in (*domain.constants, *problem.objects)] + [
        p.type for schema in domain.actions for p in schema.parameters
    ]
    if domain.types or any(t != OBJECT for t in typed):
        used.add(":typing")
    if any(either_types(p.type) for predicate in domain.predicates for p in predicate.parameters):
        used.add("either")
    for schema in domain.actions:
        used.update(_formula_features(schema.precondition))
        for effect in schema.effects:
            if effect.condition != TRUE or effect.parameters:
                used.add(":conditional-effects")
                used.update(_formula_features(effect.condition))
        if schema.cost is not None:
            used.add(":action-costs")
    used.update(_formula_features(problem.goal))
    if domain.axioms:
        used.add(":derived-predicates")
        for axiom in domain.axioms:
            used.update(_formula_features(axiom.body))
    return frozenset(used)
