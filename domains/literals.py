"""Literals written by runtimes, LLMs and decorators: `"(on a b)"`, `"(not (clear a))"`, `"ready"`.

One reader for every place that takes a literal as a string (typed action declarations, the LLM's subgoals,
states sent to the service, `Planner.plan(init=...)`), so they accept the same syntax and fail with the same
error types as PDDL files. `parse_state` is the public door for a state from Python: Atoms or the plan spelling
`"(on b a)"`, in any iterable, and a `TypeError` naming what it takes for anything else, so a wrong argument is
refused at the call and never reaches a delegate (a list of Atoms passed as a state would crash Fast Downward).
"""

from __future__ import annotations

from collections.abc import Iterable

from domains.errors import ArityError, PDDLSyntaxError, UndefinedSymbolError
from domains.formulas import parse_atom, parse_literal
from domains.model import Atom, Formula, Not, State, Task

__all__ = ["check_atom", "parse_atom", "parse_ground_atoms", "parse_ground_literal", "parse_literal", "parse_state"]

STATE_TYPES = 'a set (any iterable) of domains.Atom or of atoms spelled as in plans, like "(on b a)"'


def parse_state(task: Task, atoms: Iterable[Atom | str] | None) -> State | None:
    """A state of `task` from Python: Atoms and/or plan-spelled strings, in any iterable (None stays None: the
    task's own initial state). Strings are checked against the task like any text (`TaskInputError`: unknown
    predicate, wrong arity, unknown object); anything that is not an iterable of those is a `TypeError` that
    names the expected types."""
    if atoms is None:
        return None
    if isinstance(atoms, (str, bytes, Atom)) or not isinstance(atoms, Iterable):
        raise TypeError(f"init/state must be {STATE_TYPES}; got {type(atoms).__name__} {_short(atoms)}")
    state = set()
    for item in atoms:
        if isinstance(item, Atom):
            state.add(item)
        elif isinstance(item, str):
            state |= parse_ground_atoms(task, [item])
        else:
            raise TypeError(f"init/state must be {STATE_TYPES}; it holds {type(item).__name__} {_short(item)}")
    return frozenset(state)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_atom(task: Task, atom: Atom, text: str) -> None:
    """Raise UndefinedSymbolError / ArityError if `atom` is not a ground atom of `task`."""
    predicate = task.domain.predicate(atom.predicate)
    if predicate is None:
        known = ", ".join(sorted(p.name for p in task.domain.predicates))
        raise UndefinedSymbolError(f"{text!r}: unknown predicate '{atom.predicate}' (known: {known})")
    if len(atom.args) != predicate.arity:
        raise ArityError(
            f"{text!r}: predicate '{atom.predicate}' takes {predicate.arity} arguments, got {len(atom.args)}"
        )
    objects = task.objects()
    for arg in atom.args:
        if arg not in objects:
            raise UndefinedSymbolError(f"{text!r}: unknown object '{arg}'")


def parse_ground_literal(task: Task, text: str) -> Formula:
    """A ground literal of `task`: the atom, or its `Not`. Errors (all `TaskInputError`s, so `ValueError`s) say
    what is wrong: syntax, unknown predicate, wrong arity, unknown object."""
    atom, negated = parse_literal(text)
    check_atom(task, atom, text)
    return Not(atom) if negated else atom


def parse_ground_atoms(task: Task, texts: list[str]) -> frozenset[Atom]:
    """A state: positive ground atoms of `task`."""
    atoms = set()
    for text in texts:
        atom, negated = parse_literal(text)
        if negated:
            raise PDDLSyntaxError(f"{text!r}: a state lists the atoms that hold; leave out negated ones")
        check_atom(task, atom, text)
        atoms.add(atom)
    return frozenset(atoms)
