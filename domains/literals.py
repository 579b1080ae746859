"""Literals written by runtimes, LLMs and decorators: `"(on a b)"`, `"(not (clear a))"`, `"ready"`.

One reader for every place that takes a literal as a string (typed action declarations, the LLM's subgoals,
states sent to the service), so they accept the same syntax and fail with the same error types as PDDL files.
"""

from __future__ import annotations

from domains.errors import ArityError, PDDLSyntaxError, UndefinedSymbolError
from domains.model import Atom, Formula, Not, Task


def parse_literal(text: str) -> tuple[Atom, bool]:
    """Syntax only: `"(at a)"` -> (Atom("at", ("a",)), False); `"(not (at a))"` -> (..., True); `"ready"` ->
    Atom("ready"). Names are lower-cased, as in PDDL."""
    tokens = " ".join(str(text).replace("(", " ( ").replace(")", " ) ").split()).lower().split()
    negated = False
    if tokens[:2] == ["(", "not"] and tokens[-1:] == [")"]:
        negated, tokens = True, tokens[2:-1]
    if tokens[:1] == ["("] and tokens[-1:] == [")"]:
        tokens = tokens[1:-1]
    if not tokens or "(" in tokens or ")" in tokens:
        raise PDDLSyntaxError(f"{text!r} is not a literal like (on a b) or (not (on a b))")
    return Atom(tokens[0], tuple(tokens[1:])), negated


def check_atom(task: Task, atom: Atom, text: str) -> None:
    """Raise UndefinedSymbolError / ArityError if `atom` is not a ground atom of `task`."""
    predicate = task.domain.predicate(atom.predicate)
    if predicate is None:
        known = ", ".join(sorted(p.name for p in task.domain.predicates))
        raise UndefinedSymbolError(f"{text!r}: unknown predicate '{atom.predicate}' (known: {known})")
    if len(atom.args) != predicate.arity:
        raise ArityError(f"{text!r}: predicate '{atom.predicate}' takes {predicate.arity} arguments, "
                         f"got {len(atom.args)}")
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
