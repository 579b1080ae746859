"""The one reader for literals given as strings (typed actions, LLM subgoals, service states)."""

from __future__ import annotations

import pytest

from domains.bundled import bundled_task
from domains.errors import ArityError, PDDLSyntaxError, UndefinedSymbolError
from domains.literals import parse_ground_atoms, parse_ground_literal, parse_literal
from domains.model import Atom, Not


def test_syntax_forms():
    assert parse_literal("(On A B)") == (Atom("on", ("a", "b")), False)
    assert parse_literal("(not (clear a))") == (Atom("clear", ("a",)), True)
    assert parse_literal("ready") == (Atom("ready", ()), False)
    with pytest.raises(PDDLSyntaxError):
        parse_literal("(on (a) b)")


def test_ground_literals_are_checked_against_the_task():
    task = bundled_task("blocksworld", 3, seed=0)
    blocks = task.objects_of_type("block")
    assert parse_ground_literal(task, f"(not (clear {blocks[0]}))") == Not(Atom("clear", (blocks[0],)))
    with pytest.raises(UndefinedSymbolError, match="unknown predicate 'floating'"):
        parse_ground_literal(task, f"(floating {blocks[0]})")
    with pytest.raises(ArityError, match="takes 2 arguments, got 1"):
        parse_ground_literal(task, f"(on {blocks[0]})")
    with pytest.raises(UndefinedSymbolError, match="unknown object 'zz'"):
        parse_ground_literal(task, "(clear zz)")
    with pytest.raises(PDDLSyntaxError, match="leave out negated"):
        parse_ground_atoms(task, [f"(not (clear {blocks[0]}))"])
    assert parse_ground_atoms(task, ["(handempty)"]) == frozenset({Atom("handempty", ())})
