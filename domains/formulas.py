"""The formula language of the task model: atoms, parameters, the connectives (`Not`, `And`, `Or`, `Imply`,
`Equals`, `Exists`, `Forall`), numeric function terms, and the text of one atom or literal.

Apart from `domains.model` because it is the vocabulary the model is written in, not the task: `domains.model`
imports it (and its names are importable from there, as they always were), and nothing here knows about
domains, problems or tasks. `Atom.parse` needs the atom's text reader, so the reader lives here too, rather than
in `domains.literals`, which builds on the model. Values are immutable, as everywhere in the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from domains.errors import PDDLSyntaxError

OBJECT = "object"
EITHER = "either"


def either_types(type_name: str) -> tuple[str, ...] | None:
    """The member types of an `(either a b)` type (kept in the model as that text), None for a plain type."""
    if type_name.startswith("(" + EITHER):
        return tuple(type_name[1:-1].split()[1:])
    return None


@dataclass(frozen=True, order=True)
class Atom:
    """A predicate applied to terms; terms are object names or variables (`?x`)."""

    predicate: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "(" + " ".join((self.predicate, *self.args)) + ")"

    @classmethod
    def parse(cls, text: str) -> Atom:
        """`Atom.parse("(on b a)") == Atom("on", ("b", "a"))`, the inverse of `str`; `PDDLSyntaxError` for text
        that is not one positive atom (`domains.literals.parse_atom`)."""
        return parse_atom(text)


@dataclass(frozen=True)
class Parameter:
    name: str  # with the leading "?"
    type: str = OBJECT


@dataclass(frozen=True)
class Not:
    arg: Formula


@dataclass(frozen=True)
class And:
    parts: tuple[Formula, ...] = ()


@dataclass(frozen=True)
class Or:
    parts: tuple[Formula, ...] = ()


@dataclass(frozen=True)
class Imply:
    condition: Formula
    consequence: Formula


@dataclass(frozen=True)
class Equals:
    left: str
    right: str


@dataclass(frozen=True)
class Exists:
    parameters: tuple[Parameter, ...]
    body: Formula


@dataclass(frozen=True)
class Forall:
    parameters: tuple[Parameter, ...]
    body: Formula


Formula = Atom | Not | And | Or | Imply | Equals | Exists | Forall
TRUE: Formula = And(())


@dataclass(frozen=True)
class FunctionTerm:
    """A numeric function applied to terms, e.g. `(road-length ?from ?to)` as an action cost."""

    name: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "(" + " ".join((self.name, *self.args)) + ")"


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


def parse_atom(text: str) -> Atom:
    """`"(on b a)"` -> `Atom("on", ("b", "a"))` (syntax only, lower-cased); `PDDLSyntaxError` for anything that
    is not one positive atom."""
    if not isinstance(text, str):
        raise TypeError(f'an atom is a string like "(on b a)", not {type(text).__name__}')
    atom, negated = parse_literal(text)
    if negated:
        raise PDDLSyntaxError(f"{text!r} is a negated literal; an atom is positive, like (on b a)")
    return atom
