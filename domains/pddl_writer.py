"""Turn the task model back into PDDL text that Fast Downward's translator and `domains.pddl` both accept.

Tasks from JSON or Python get their planner-facing texts here, and `replace_init` uses it to restate a task from
the state the runtime is actually in. The output is deterministic (init atoms sorted), so equal models give equal
texts and equal fingerprints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from domains.model import (
    OBJECT,
    TRUE,
    ActionSchema,
    And,
    Atom,
    Axiom,
    Cost,
    Domain,
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
    Problem,
    Task,
)
from domains.pddl_domain import distinct_parameters


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _typed(pairs: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> str:
    """`a b - t c - object`: consecutive names of one type grouped. Names of type object get an explicit
    `- object` unless the whole list is untyped, so untyped domains stay free of `:typing` syntax."""
    if all(t == OBJECT for _, t in pairs):
        return " ".join(name for name, _ in pairs)
    parts: list[str] = []
    for index, (name, type_name) in enumerate(pairs):
        parts.append(name)
        if index + 1 == len(pairs) or pairs[index + 1][1] != type_name:
            parts.append(f"- {type_name}")
    return " ".join(parts)


def _params(params: tuple[Parameter, ...]) -> str:
    return _typed([(p.name, p.type) for p in params])


def formula_to_pddl(formula: Formula, binding: Mapping[str, str] | None = None) -> str:
    """PDDL text of `formula`; variables bound in `binding` are replaced by their objects (for messages about
    grounded actions)."""
    env = binding or {}
    if isinstance(formula, Atom):
        return "(" + " ".join((formula.predicate, *(env.get(a, a) for a in formula.args))) + ")"
    if isinstance(formula, Not):
        return f"(not {formula_to_pddl(formula.arg, env)})"
    if isinstance(formula, And):
        return "(and " + " ".join(formula_to_pddl(p, env) for p in formula.parts) + ")" if formula.parts else "(and)"
    if isinstance(formula, Or):
        return "(or " + " ".join(formula_to_pddl(p, env) for p in formula.parts) + ")"
    if isinstance(formula, Imply):
        return f"(imply {formula_to_pddl(formula.condition, env)} {formula_to_pddl(formula.consequence, env)})"
    if isinstance(formula, Equals):
        return f"(= {env.get(formula.left, formula.left)} {env.get(formula.right, formula.right)})"
    if isinstance(formula, (Exists, Forall)):
        word = "exists" if isinstance(formula, Exists) else "forall"
        bound = {p.name for p in formula.parameters}
        inner = {k: v for k, v in env.items() if k not in bound}
        return f"({word} ({_params(formula.parameters)}) {formula_to_pddl(formula.body, inner)})"
    raise TypeError(f"not a formula: {formula!r}")


def effect_to_pddl(effect: Effect) -> str:
    text = f"(not {effect.atom})" if effect.negated else str(effect.atom)
    if effect.condition != TRUE:
        text = f"(when {formula_to_pddl(effect.condition)} {text})"
    if effect.parameters:
        text = f"(forall ({_params(effect.parameters)}) {text})"
    return text


def _cost(cost: Cost) -> str:
    amount = str(cost) if isinstance(cost, FunctionTerm) else _number(cost)
    return f"(increase (total-cost) {amount})"


def _action(schema: ActionSchema) -> str:
    lines = [f"  (:action {schema.name}", f"    :parameters ({_params(schema.parameters)})"]
    if schema.precondition != TRUE:
        lines.append(f"    :precondition {formula_to_pddl(schema.precondition)}")
    parts = [effect_to_pddl(e) for e in schema.effects]
    if schema.cost is not None:
        parts.append(_cost(schema.cost))
    lines.append("    :effect (and " + " ".join(parts) + "))" if parts else "    :effect (and))")
    return "\n".join(lines)


def _axiom(axiom: Axiom) -> str:
    params = _params(axiom.parameters)
    head = f"({axiom.head.predicate}{' ' + params if params else ''})"
    return f"  (:derived {head}\n    {formula_to_pddl(axiom.body)})"


def domain_to_pddl(domain: Domain) -> str:
    """The domain as PDDL text; `parse_domain` of it gives back an equal `Domain`."""
    out = [f"(define (domain {domain.name})"]
    if domain.requirements:
        out.append(f"  (:requirements {' '.join(domain.requirements)})")
    if domain.types:
        out.append("  (:types " + " ".join(f"{t} - {parent}" for t, parent in domain.types) + ")")
    if domain.constants:
        out.append(f"  (:constants {_typed(domain.constants)})")
    out.append("  (:predicates")
    for predicate in domain.predicates:
        params = _params(distinct_parameters(predicate.parameters))
        out.append(f"    ({predicate.name}{' ' + params if params else ''})")
    out.append("  )")
    if domain.functions:
        out.append("  (:functions")
        for function in domain.functions:
            params = _params(function.parameters)
            out.append(f"    ({function.name}{' ' + params if params else ''}) - number")
        out.append("  )")
    out.extend(_axiom(axiom) for axiom in domain.axioms)
    out.extend(_action(schema) for schema in domain.actions)
    out.append(")")
    return "\n".join(out) + "\n"


def problem_to_pddl(problem: Problem) -> str:
    """The problem as PDDL text, init atoms sorted so equal problems give equal texts."""
    out = [f"(define (problem {problem.name})", f"  (:domain {problem.domain_name})"]
    if problem.objects:
        out.append(f"  (:objects {_typed(problem.objects)})")
    out.append("  (:init")
    out.extend(f"    {atom}" for atom in sorted(problem.init))
    out.extend(f"    (= {term} {_number(value)})" for term, value in problem.numeric_init)
    out.append("  )")
    out.append(f"  (:goal {formula_to_pddl(problem.goal)})")
    if problem.minimize_total_cost:
        out.append("  (:metric minimize (total-cost))")
    out.append(")")
    return "\n".join(out) + "\n"


def task_with_texts(domain: Domain, problem: Problem) -> Task:
    """A `Task` whose PDDL texts come from this writer (for tasks not read from PDDL files)."""
    return Task(domain, problem, domain_pddl=domain_to_pddl(domain), problem_pddl=problem_to_pddl(problem))


def replace_init(task: Task, init: frozenset[Atom]) -> Task:
    """The same task from another initial state. The domain text is kept byte for byte (the planners keep
    seeing what the user wrote); the problem text is rewritten, so the fingerprint follows the state."""
    problem = dataclasses.replace(task.problem, init=frozenset(init))
    return Task(
        task.domain,
        problem,
        domain_pddl=task.domain_pddl or domain_to_pddl(task.domain),
        problem_pddl=problem_to_pddl(problem),
    )
