"""Typed Python actions, GOAP-style, compiled into a planning `Task`.

An action is a Python function whose annotated parameter types are its preconditions and whose return type is
its effect: `def find_person(text: UserInput) -> Person` reads "when a UserInput is known, find_person makes a
Person known". Compiled, every type becomes a 0-ary fact `(known-<type>)` and every action a parameterless
schema, so the task is tiny and any planner of the cascade can solve it; several actions producing one type are
alternatives the planner chooses between by cost (learned costs included).

Extra facts can be declared for actions whose conditions are not types (`requires=`, `adds=`, `deletes=`): that
is the explicit precondition/effect form for runtimes that think in facts rather than types.

Named bindings. A parameter binds by type (the latest object of its type: one object per type, the default) or,
when its name is a *known name*, by name and type: `def route(source: City, target: City)` with objects named
`source` and `target` on the blackboard. Known names are the names actions give their outputs
(`@action(outputs=["source"])`) and the names of inputs given by keyword. A named parameter's precondition is
`(known-<name>_<type>)` (e.g. `(known-source_city)`: `_` cannot occur in a kebab name, so these facts never clash
with type facts), a type-bound one's stays `(known-<type>)`; a named output makes both true. Named facts
`@action(pre=["verified(doc)"], post=["sent(doc)", "not draft(doc)"])` are about the object a parameter (or, in
`post`, a named output) binds: `verified(doc)` compiles to `(verified-<key>)` where key is `doc_document` when
`doc` is a known name and `document` otherwise, so they follow the binding. Everything stays 0-ary, so the task
stays tiny and the in-process exact search plans it in microseconds.

Async: an `async def` action is a coroutine action (`TypedAction.is_async`); `@action(timeout=S)` (coroutine
actions only: a running thread cannot be cancelled) bounds it. The runtime (`portfolio.agent.runtime`) awaits it.

Pure: depends only on `domains`. The runtime that executes these actions lives in `portfolio.agent`.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from domains.literals import parse_literal
from domains.model import TRUE, ActionSchema, And, Atom, Domain, Effect, FunctionTerm, Predicate, Problem, Task
from domains.pddl_writer import domain_to_pddl, problem_to_pddl

HINTS = ("always", "conditional", "never")
DOMAIN_NAME = "typed-agent"


class ReplanRequested(Exception):
    """Raised by an action to ask for a new plan. `updates` are applied to the state first: for typed actions
    a mapping type -> object (None forgets the type), for PDDL actions literals such as "(connected db)" or
    "(not (connected db))"."""

    def __init__(self, reason: str, updates: Mapping[Any, Any] | Iterable[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.updates = updates


class TypedActionError(TypeError):
    """A function that cannot be compiled into an action (missing annotation, unsupported type, clash)."""


def kebab(name: str) -> str:
    """`UserInput` -> `user-input`, `find_person` -> `find-person`: PDDL names, lower case, no underscores."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).replace("_", "-").lower()
    text = re.sub(r"[^a-z0-9-]", "-", text).strip("-")
    if not text or not text[0].isalpha():
        text = "t-" + text
    return text


def type_name(t: Any) -> str:
    """The type's name as it appears in facts: a class by its `__name__`, a string as given."""
    if isinstance(t, str):
        return kebab(t)
    if isinstance(t, type):
        return kebab(t.__name__)
    raise TypedActionError(f"expected a class or a type name, got {t!r}")


def fact(t: Any) -> Atom:
    """`(known-person)` for `Person`: the fact that an object of that type is on the blackboard."""
    return Atom("known-" + type_name(t))


def named_fact(name: str, t: Any) -> Atom:
    """`(known-source_city)`: an object of type `City` is on the blackboard under the name `source`."""
    return Atom(f"known-{binding_key(name, t, (name,))}")


def binding_key(name: str, t: Any, names: Iterable[str]) -> str:
    """What parameter `name: t` binds: `<name>_<type>` when `name` is a known name, else `<type>`."""
    return f"{kebab(name)}_{type_name(t)}" if name in names else type_name(t)


_NAMED = re.compile(r"^\s*(not\s+|!)?([A-Za-z][\w-]*)\s*\(\s*([A-Za-z_]\w*)?\s*\)\s*$")


def _condition(text: str, where: str, params: Mapping[str, Any], negation: bool) -> tuple[str, str | None, bool]:
    """Read a pre/post entry: (predicate, the parameter or output it is about or None, negated). `verified(doc)`
    names a parameter; a PDDL literal such as `(report-sent)` is taken as it is."""
    match = _NAMED.match(text)
    if match is None:
        atom, negated = parse_literal(text)
        if atom.args:
            raise TypedActionError(f"{where}: condition {text!r} must be 0-ary, like (ready) or verified(doc)")
        pred, about = atom.predicate, None
    else:
        negated, pred, about = bool(match.group(1)), kebab(match.group(2)), match.group(3)
        if about is not None and about not in params:
            raise TypedActionError(
                f"{where}: condition {text!r} is about '{about}', which is not one of "
                f"{', '.join(params) or 'no parameters or named outputs'}"
            )
    if negated and not negation:
        raise TypedActionError(f"{where}: precondition {text!r} cannot be negated (STRIPS: say what must hold)")
    return pred, about, negated


@dataclass(frozen=True)
class TypedAction:
    """An action declared by a function. `inputs` maps parameter names to their types; `outputs` are the types
    the return value makes known (a tuple return makes several known). `side_effects` marks actions that change
    the world (a pre-execution check may veto them; a failure of theirs is not retried blindly)."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple[tuple[str, Any], ...]
    outputs: tuple[Any, ...]
    cost: float = 1.0
    goal: bool = False
    hint: str = "conditional"
    side_effects: bool = False
    requires: tuple[str, ...] = ()
    adds: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    replan_when: Callable[[Any], bool] | None = field(default=None, compare=False)
    replan_reason: str = ""
    output_names: tuple[str | None, ...] = ()  # one per output, None: unnamed
    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()
    timeout: float | None = None
    is_async: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def named_outputs(self) -> list[tuple[str, Any]]:
        return [(n, t) for n, t in zip(self.output_names, self.outputs) if n is not None]

    def input_keys(self, names: Iterable[str] = ()) -> list[str]:
        """The binding key of each input (see `binding_key`)."""
        names = frozenset(names)
        return [binding_key(p, t, names) for p, t in self.inputs]

    def conditions(self, names: Iterable[str] = ()) -> tuple[list[Atom], list[Atom], list[Atom]]:
        """(preconditions, adds, deletes) of the declared facts (`requires`/`adds`/`deletes`, `pre`/`post`), with
        named facts resolved against the known `names`."""
        names = frozenset(names)
        where = f"action {self.name}"
        keys = {p: binding_key(p, t, names) for p, t in self.inputs}
        keys.update({n: binding_key(n, t, names | {n}) for n, t in self.named_outputs()})

        def atom(pred: str, about: str | None) -> Atom:
            return Atom(pred if about is None else f"{pred}-{keys[about]}")

        pre = [parse_literal(r)[0] for r in self.requires]
        pre += [atom(p, a) for p, a, _ in (_condition(t, where, keys, False) for t in self.pre)]
        adds = [parse_literal(a)[0] for a in self.adds]
        deletes = [parse_literal(d)[0] for d in self.deletes]
        for text in self.post:
            pred, about, negated = _condition(text, where, keys, True)
            (deletes if negated else adds).append(atom(pred, about))
        return pre, adds, deletes

    def schema(self, names: Iterable[str] = ()) -> ActionSchema:
        names = frozenset(names)
        required, adds, deletes = self.conditions(names)
        pre = [Atom("known-" + key) for key in self.input_keys(names)] + required
        effects = [Effect(fact(t)) for t in self.outputs]
        effects += [Effect(named_fact(n, t)) for n, t in self.named_outputs()]
        effects += [Effect(a) for a in adds] + [Effect(d, negated=True) for d in deletes]
        precondition = And(tuple(dict.fromkeys(pre))) if pre else TRUE
        return ActionSchema(self.name, (), precondition, tuple(effects), cost=float(self.cost))


def _outputs(annotation: Any, where: str) -> tuple[Any, ...]:
    if annotation in (None, type(None), inspect.Signature.empty):
        return ()
    if typing.get_origin(annotation) is tuple:
        return tuple(a for a in typing.get_args(annotation) if a is not Ellipsis)
    if isinstance(annotation, type):
        return (annotation,)
    raise TypedActionError(f"{where}: return type {annotation!r} is not a class or tuple of classes")


def typed_action(
    fn: Callable[..., Any],
    *,
    cost: float = 1.0,
    goal: bool = False,
    hint: str = "conditional",
    side_effects: bool = False,
    name: str | None = None,
    requires: Sequence[str] = (),
    adds: Sequence[str] = (),
    deletes: Sequence[str] = (),
    outputs: str | Sequence[str | None] | None = None,
    pre: Sequence[str] = (),
    post: Sequence[str] = (),
    timeout: float | None = None,
) -> TypedAction:
    """Read a function's signature into a `TypedAction`: every parameter must be annotated with a class,
    except parameters with a default value (settings the planner leaves alone) and *args/**kwargs.
    `outputs` names what the action returns (one name per returned type); `pre`/`post` are named facts
    (module docstring); `timeout` bounds a coroutine action in seconds."""
    where = f"action {getattr(fn, '__qualname__', fn)!s}"
    is_async = inspect.iscoroutinefunction(fn)
    if timeout is not None and not (is_async and timeout > 0):
        raise TypedActionError(
            f"{where}: timeout needs an async def action and a number of seconds > 0 (a running "
            f"thread cannot be cancelled), got timeout={timeout!r}"
        )
    if hint not in HINTS:
        raise TypedActionError(f"{where}: hint must be one of {', '.join(HINTS)}, got {hint!r}")
    # inf passed `>= 0` and ended the first run in an OverflowError (costs are compiled to whole numbers); a
    # str was a bare TypeError from the comparison
    if not isinstance(cost, (int, float)) or not (math.isfinite(cost) and cost >= 0):
        raise TypedActionError(f"{where}: cost must be a finite number >= 0, got {cost!r}")
    hints = typing.get_type_hints(fn)
    inputs = []
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name)
        if not isinstance(annotation, type) and (
            param.default is not inspect.Parameter.empty or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
        ):
            continue  # configuration with a default (or *args/**kwargs), not something to plan for
        if not isinstance(annotation, type):
            raise TypedActionError(
                f"{where}: parameter '{param.name}' needs a class annotation (its type is its precondition), "
                f"got {annotation!r}"
            )
        inputs.append((param.name, annotation))
    predicate, reason = getattr(fn, "__replan_when__", (None, ""))
    returns = _outputs(hints.get("return", inspect.Signature.empty), where)
    output_names = _output_names(outputs, returns, where)
    made = TypedAction(
        name=name or kebab(fn.__name__), fn=fn, inputs=tuple(inputs), outputs=returns, cost=float(cost), goal=goal,
        hint=hint, side_effects=side_effects, requires=tuple(requires), adds=tuple(adds), deletes=tuple(deletes),
        replan_when=predicate, replan_reason=reason, output_names=output_names, pre=tuple(pre), post=tuple(post),
        timeout=timeout, is_async=is_async,
    )  # fmt: skip
    made.conditions()  # every pre/post entry is checked now, where the action is declared
    return made


def _output_names(
    outputs: str | Sequence[str | None] | None, returns: tuple[Any, ...], where: str
) -> tuple[str | None, ...]:
    if outputs is None:
        return ()
    names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    if len(names) != len(returns):
        raise TypedActionError(
            f"{where}: outputs={list(names)} names {len(names)} values but the return type declares {len(returns)}"
        )
    for n in names:
        if n is not None and not (isinstance(n, str) and n.isidentifier()):
            raise TypedActionError(f"{where}: output names must be identifiers like 'source', got {n!r}")
    return names


def action(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Decorator: `@action` or `@action(cost=2.0, hint="always", side_effects=True)` (see `typed_action`)."""
    if fn is not None:
        return typed_action(fn, **options)
    return lambda f: typed_action(f, **options)


def replan_when(predicate: Callable[[Any], bool], reason: str = "") -> Callable[[Any], Any]:
    """Wrap an action (above or below `@action`): after it returns `result`, ask for a replan when
    `predicate(result)` is true."""
    text = reason or f"replan_when({getattr(predicate, '__name__', 'predicate')}) held"

    def wrap(target: Any) -> Any:
        if isinstance(target, TypedAction):
            return replace(target, replan_when=predicate, replan_reason=text)
        target.__replan_when__ = (predicate, text)
        return target

    return wrap


def registered_types(actions: Sequence[TypedAction]) -> dict[str, Any]:
    """Type name -> class for every type the actions mention; a name used by two different classes is an
    error, since both would become the same fact."""
    found: dict[str, Any] = {}
    for act in actions:
        for t in [t for _, t in act.inputs] + list(act.outputs):
            key = type_name(t)
            if found.setdefault(key, t) is not t:
                raise TypedActionError(f"two different types are both named '{key}' ({found[key]!r} and {t!r})")
    return found


def output_names(actions: Sequence[TypedAction]) -> dict[str, Any]:
    """Name -> type of every named output; one name given to outputs of two types is an error (a name holds
    one object)."""
    found: dict[str, Any] = {}
    for act in actions:
        for name, t in act.named_outputs():
            if found.setdefault(name, t) is not t:
                raise TypedActionError(
                    f"output name '{name}' is given to a {found[name].__name__} and a "
                    f"{t.__name__}; a name holds one object"
                )
    return found


def known_names(actions: Sequence[TypedAction], inputs: Iterable[str] = ()) -> frozenset[str]:
    """The names parameters bind by: named outputs plus the names of inputs given by keyword."""
    return frozenset(output_names(actions)) | frozenset(inputs)


def compile_actions(
    actions: Sequence[TypedAction], goal: Sequence[Any], init: Iterable[Atom] = (), names: Iterable[str] = ()
) -> Task:
    """The planning task of `actions`: facts `(known-<type>)` (plus named and declared facts), one parameterless
    schema per action with its cost, the goal that every type in `goal` (classes, type names or literal
    strings such as "(report-sent)") is known, and `init` as the initial state. `names`: the names of inputs
    given by keyword (named outputs are added)."""
    action_names = [a.name for a in actions]
    duplicates = sorted({n for n in action_names if action_names.count(n) > 1})
    if duplicates:
        raise TypedActionError(f"action names must be unique; repeated: {', '.join(duplicates)}")
    registered_types(actions)
    known = known_names(actions, names)
    schemas = tuple(a.schema(known) for a in actions)
    goal_atoms = tuple(parse_literal(g)[0] if isinstance(g, str) and g.startswith("(") else fact(g) for g in goal)
    if not goal_atoms:
        raise TypedActionError("a goal is needed: pass goal=SomeType or mark an action @action(goal=True)")
    atoms: dict[str, None] = {}
    for schema in schemas:
        for part in schema.precondition.parts if isinstance(schema.precondition, And) else ():
            assert isinstance(part, Atom)  # schema() builds preconditions as conjunctions of atoms
            atoms[part.predicate] = None
        for effect in schema.effects:
            atoms[effect.atom.predicate] = None
    for atom in list(goal_atoms) + list(init):
        atoms[atom.predicate] = None
    domain = Domain(
        name=DOMAIN_NAME, requirements=(":strips", ":action-costs"),
        predicates=tuple(Predicate(p) for p in sorted(atoms)), functions=(Predicate("total-cost"),),
        actions=schemas,
    )  # fmt: skip
    problem = Problem(
        name=DOMAIN_NAME + "-problem", domain_name=DOMAIN_NAME, init=frozenset(init),
        numeric_init=((FunctionTerm("total-cost"), 0.0),),
        goal=And(goal_atoms) if len(goal_atoms) > 1 else goal_atoms[0], minimize_total_cost=True,
    )  # fmt: skip
    # Fast Downward reads integer costs only: the planner-facing text scales every cost by the smallest power of
    # ten (up to 1000) that makes them whole; the model keeps the declared costs, which validation and
    # reported plan costs use. Relative costs, and so the cheapest plan, are unchanged.
    factor = next((f for f in (1, 10, 100) if all(abs(a.cost * f - round(a.cost * f)) < 1e-9 for a in actions)), 1000)
    text_domain = replace(
        domain,
        actions=tuple(replace(s, cost=float(round(a.cost * factor))) for s, a in zip(schemas, actions, strict=True)),
    )
    return Task(domain, problem, domain_pddl=domain_to_pddl(text_domain), problem_pddl=problem_to_pddl(problem))


__all__ = [
    "ReplanRequested",
    "TypedAction",
    "TypedActionError",
    "action",
    "binding_key",
    "compile_actions",
    "fact",
    "kebab",
    "known_names",
    "named_fact",
    "output_names",
    "parse_literal",
    "registered_types",
    "replan_when",
    "type_name",
    "typed_action",
]
