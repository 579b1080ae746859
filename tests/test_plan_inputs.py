"""Inputs that say what they take: `Planner.plan(task, init=...)` takes a state as Atoms or as
atoms spelled as in plans (`"(on b a)"`, what HTTP and MCP take), in any iterable, and plans it with Fast Downward
like the task's own state; anything else is a `TypeError` naming the expected types, raised before any delegate
runs. `Atom.parse`, `domains.parse_state` and `task.init` are public. Real Fast Downward, plans validated."""

from __future__ import annotations

import pytest
from support import IPC

from domains import Atom, TaskInputError, parse_state
from domains.ground_text import parse_ground_action
from domains.pddl import parse_task
from domains.validate import validate_plan
from portfolio.delegates.fast_downward.inprocess import INPROCESS_NAME

# b on a, the rest on the table: a state other than the problem's own
STATE = ["(clear b)", "(on b a)", "(ontable a)", "(clear c)", "(ontable c)", "(clear d)", "(ontable d)", "(handempty)"]


@pytest.fixture(scope="module")
def task():
    blocks = IPC / "blocks"
    return parse_task(
        (blocks / "domain.pddl").read_text(),
        (blocks / "probBLOCKS-4-0.pddl").read_text(),
        "domain.pddl",
        "probBLOCKS-4-0.pddl",
    )


@pytest.fixture(scope="module")
def planner(classical_planner, task):
    """Warm: the task planned once from its own state, as an agent does before it replans from another."""
    assert classical_planner.plan(task).status.value == "solved"
    return classical_planner


STATES = {
    "list of Atoms": lambda: [Atom.parse(s) for s in STATE],
    "set of strings": lambda: set(STATE),
    "tuple of mixed": lambda: tuple(Atom.parse(s) if i % 2 else s for i, s in enumerate(STATE)),
    "generator": lambda: (s.upper() for s in STATE),  # PDDL names are case-insensitive
}


@pytest.mark.parametrize("make", STATES.values(), ids=STATES.keys())
def test_a_state_in_any_accepted_form_is_planned_by_fast_downward(task, planner, make):
    result = planner.plan(task, init=make())
    assert result.status.value == "solved", result.attempts
    # Fast Downward's translation answers: searched in this process (a replan of a small task) or by its processes
    fast_downward = ("fast-downward", INPROCESS_NAME)
    assert result.delegate in fast_downward, [(a.delegate, a.status, a.reason) for a in result.attempts]
    assert all(a.status.value != "error" for a in result.attempts), result.attempts
    init = frozenset(Atom.parse(s) for s in STATE)
    assert validate_plan(task, [parse_ground_action(s) for s in result.plan], init=init).ok


@pytest.mark.parametrize(
    "init, named",
    [
        ("(on b a)", "str"),  # one string is not a state (it would be read as its characters)
        (Atom("on", ("b", "a")), "Atom"),
        ([("on", "b", "a")], "tuple"),
        (42, "int"),
        ([Atom("clear", ("b",)), 3], "int"),
    ],
)
def test_anything_else_is_a_type_error_before_any_delegate_runs(task, planner, monkeypatch, init, named):
    def no_delegate(request):
        raise AssertionError("a delegate ran")

    monkeypatch.setattr(planner.cascade, "solve", no_delegate)
    with pytest.raises(TypeError, match=f"domains.Atom or of atoms spelled as in plans.*{named}"):
        planner.plan(task, init=init)


def test_other_wrong_arguments_are_type_errors(task, planner, monkeypatch):
    monkeypatch.setattr(planner.cascade, "solve", lambda request: pytest.fail("a delegate ran"))
    with pytest.raises(TypeError, match="task must be a domains.Task.*got str"):
        planner.plan("blocks.pddl")
    with pytest.raises(TypeError, match="excluded must be .*GroundAction.*got str"):
        planner.plan(task, excluded="(pick-up b)")
    with pytest.raises(TypeError, match="previous_plan must be .*holds int"):
        planner.plan(task, previous_plan=[1])


def test_bad_text_in_a_state_is_a_task_input_error_naming_it(task, planner):
    with pytest.raises(TaskInputError, match="unknown predicate 'onn'"):
        planner.plan(task, init=["(onn b a)"])
    with pytest.raises(TaskInputError, match="unknown object 'z'"):
        planner.plan(task, init=["(clear z)"])


def test_atom_parse_parse_state_and_task_init(task):
    assert Atom.parse("(ON b a)") == Atom("on", ("b", "a")) and str(Atom.parse("(on b a)")) == "(on b a)"
    assert Atom.parse("(handempty)") == Atom("handempty")
    with pytest.raises(TaskInputError, match="negated"):
        Atom.parse("(not (on b a))")
    assert task.init == task.problem.init and Atom.parse("(handempty)") in task.init
    assert parse_state(task, [str(a) for a in task.init]) == task.init
    assert parse_state(task, None) is None
