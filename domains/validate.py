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
into object sets) and the compiled form is cached per `Task` object for as long as the task lives; that compiled
form is `domains.validate_compile`. This module keeps the `Validation` verdict, the diagnosis of what failed (in
PDDL form, for messages) and the public functions.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass, field
from itertools import product

from domains.model import And, Atom, Forall, Formula, GroundAction, Plan, State, Task
from domains.pddl_writer import formula_to_pddl
from domains.validate_compile import Env, _compile_formula, _Compiled, _compiled, _quantified, _Schema

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
        hint = (
            f"; did you mean {_or_list(close)}?" if close else f"; known actions: {', '.join(sorted(compiled.schemas))}"
        )
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


def successor(task: Task, state: State, action: GroundAction) -> State | None:
    """The state after `action`, or None when its precondition does not hold in `state`: `applicable` and
    `apply` in one, with the derived atoms computed once. `action` must be well-formed (e.g. a step of a plan
    that was validated): this is the simulator's inner loop."""
    compiled = _compiled(task)
    schema = compiled.schemas[action.name]
    env = _env(schema, action)
    full = compiled.closure(state)
    if not schema.precondition(full, env):
        return None
    adds, deletes = _effects(schema, full, env)
    return state.difference(deletes).union(adds)


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
        steps = f"{len(plan)} step{'s' if len(plan) != 1 else ''}"
        text = f"goal not reached after {steps}: {', '.join(missing)} {verb} not hold"
        return Validation(False, final, cost, None, "goal", text, missing)
    return Validation(True, final, cost)
