"""unified-planning problems built in Python become tasks through UP's PDDL writer and our parser."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from support import example

from domains.model import And, Atom, Equals, Not
from domains.pddl import parse_task

ROOT = Path(__file__).resolve().parents[1]


def two_blocks(action_name: str = "move", object_name: str = "a", cost: int | None = 3):
    """A 2-block world: move a block from the table onto another clear block."""
    from unified_planning.model.metrics import MinimizeActionCosts
    from unified_planning.shortcuts import BoolType, Fluent, InstantaneousAction, Object, Problem, UserType
    from unified_planning.shortcuts import Equals as UEquals
    from unified_planning.shortcuts import Not as UNot

    block = UserType("Block")
    on = Fluent("on", BoolType(), x=block, y=block)
    clear = Fluent("clear", BoolType(), x=block)
    ontable = Fluent("ontable", BoolType(), x=block)
    move = InstantaneousAction(action_name, x=block, y=block)
    x, y = move.parameters
    move.add_precondition(clear(x))
    move.add_precondition(clear(y))
    move.add_precondition(ontable(x))
    move.add_precondition(UNot(UEquals(x, y)))
    move.add_effect(on(x, y), True)
    move.add_effect(ontable(x), False)
    move.add_effect(clear(y), False)
    problem = Problem("two")
    for fluent in (on, clear, ontable):
        problem.add_fluent(fluent, default_initial_value=False)
    problem.add_action(move)
    a, b = Object(object_name, block), Object("b", block)
    problem.add_objects([a, b])
    for obj in (a, b):
        problem.set_initial_value(clear(obj), True)
        problem.set_initial_value(ontable(obj), True)
    problem.add_goal(on(a, b))
    if cost is not None:
        problem.add_quality_metric(MinimizeActionCosts({move: cost}))
    return problem


def test_two_block_problem_becomes_the_expected_task() -> None:
    from domains.up_bridge import task_from_up

    task = task_from_up(two_blocks())
    assert task.problem.objects == (("a", "block"), ("b", "block"))
    assert task.problem.init == {
        Atom("clear", ("a",)),
        Atom("clear", ("b",)),
        Atom("ontable", ("a",)),
        Atom("ontable", ("b",)),
    }
    assert task.problem.goal == And((Atom("on", ("a", "b")),))
    move = task.domain.action("move")
    assert move is not None and move.cost == 3.0 and task.problem.minimize_total_cost
    assert Not(Equals("?x", "?y")) in move.precondition.parts  # type: ignore[union-attr]
    assert [(e.atom.predicate, e.negated) for e in move.effects] == [("on", False), ("ontable", True), ("clear", True)]
    assert parse_task(task.domain_pddl, task.problem_pddl) == task


def test_names_up_renames_are_mapped_back() -> None:
    from domains.up_bridge import task_from_up

    # UP writes 'goal_' and 'domain_' to dodge its keyword list; both are fine names in PDDL
    task = task_from_up(two_blocks(action_name="domain", object_name="goal", cost=None))
    assert task.domain.action("domain") is not None
    assert ("goal", "block") in task.problem.objects
    assert task.problem.goal == And((Atom("on", ("goal", "b")),))
    assert "goal_" not in task.problem_pddl and "(:action domain" in task.domain_pddl
    assert parse_task(task.domain_pddl, task.problem_pddl) == task
    assert not task.has_action_costs()

    from fast_downward.translate import main as translator
    from fast_downward.translate import normalize, options
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    options.set_options(["d", "p"])
    fd_task = parsing_functions.parse_task(
        lisp_parser.parse_nested_list(io.StringIO(task.domain_pddl)),
        lisp_parser.parse_nested_list(io.StringIO(task.problem_pddl)),
    )
    normalize.normalize(fd_task)
    assert "(domain goal b)" in {op.name for op in translator.pddl_to_sas(fd_task).operators}


def test_domains_never_import_unified_planning_at_import_time() -> None:
    code = (
        "import sys, domains, domains.pddl, domains.pddl_writer, domains.json_task, domains.load, "
        "domains.up_bridge; assert 'unified_planning' not in sys.modules, 'imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_numeric_fluents_are_unsupported() -> None:
    from domains.errors import UnsupportedFeatureError
    from domains.up_bridge import task_from_up

    battery = example("up_oneshot").battery()  # a numeric fluent, the problem the example shows refused
    with pytest.raises(UnsupportedFeatureError, match="numeric") as info:
        task_from_up(battery)
    assert info.value.file == "<unified-planning domain>" and info.value.line
