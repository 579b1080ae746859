"""The validator's verdicts and diagnoses: on hand-made tasks (conditional and quantified effects, every kind of
failure) and on IPC tasks with plans produced by Fast Downward (lama-first), pasted in as text."""

from __future__ import annotations

import pytest
from support import IPC

from domains.model import (
    ActionSchema,
    And,
    Atom,
    Domain,
    Effect,
    Equals,
    Exists,
    Forall,
    GroundAction,
    Imply,
    Not,
    Or,
    Parameter,
    Problem,
    Task,
    plan_cost,
)
from domains.pddl import parse_task
from domains.validate import (
    Validation,
    applicable,
    apply,
    check_action,
    goal_reached,
    holds,
    unmet_goals,
    unsatisfied_preconditions,
    validate_plan,
)


def plan_of(text: str) -> list[GroundAction]:
    """'(a x y) (b z)' -> [GroundAction('a', ('x', 'y')), GroundAction('b', ('z',))]"""
    steps = [s.split() for s in text.replace(")", "").split("(") if s.strip()]
    return [GroundAction(s[0], tuple(s[1:])) for s in steps]


def ipc_task(domain: str, problem: str) -> Task:
    folder = IPC / domain
    return parse_task(
        (folder / "domain.pddl").read_text(),
        (folder / problem).read_text(),
        domain_file=str(folder / "domain.pddl"),
        problem_file=str(folder / problem),
    )


# ---- hand-made tasks ------------------------------------------------------------------------------------

BLOCKS = """(define (domain bw) (:requirements :strips :typing) (:types block)
  (:predicates (on ?x - block ?y - block) (ontable ?x - block) (clear ?x - block) (holding ?x - block) (handempty))
  (:action pick-up :parameters (?x - block)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (ontable ?x)) (not (clear ?x)) (not (handempty))))
  (:action stack :parameters (?x - block ?y - block)
    :precondition (and (holding ?x) (clear ?y))
    :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y)))))"""
BLOCKS_PROBLEM = """(define (problem p) (:domain bw) (:objects a b c - block)
  (:init (ontable a) (ontable b) (ontable c) (clear a) (clear b) (clear c) (handempty))
  (:goal (and (on a b) (on b c))))"""

# Balls ride in a box: moving the box moves every ball inside it (forall + when); `flip` toggles a light with
# two conditional effects whose conditions must both be read in the old state; `refresh` deletes and adds
# the same atom.
BOX = """(define (domain box) (:requirements :typing :conditional-effects :adl :action-costs)
  (:types ball - item  room box light)
  (:predicates (at ?i - item ?r - room) (box-at ?b - box ?r - room) (in ?i - item ?b - box) (on ?l - light)
               (ready) (connected ?r1 - room ?r2 - room))
  (:functions (total-cost) - number (distance ?r1 - room ?r2 - room) - number)
  (:action put-in :parameters (?i - item ?b - box ?r - room)
    :precondition (and (at ?i ?r) (box-at ?b ?r) (not (in ?i ?b)))
    :effect (and (in ?i ?b) (increase (total-cost) 1)))
  (:action push :parameters (?b - box ?from - room ?to - room)
    :precondition (and (box-at ?b ?from) (or (connected ?from ?to) (connected ?to ?from))
                       (not (= ?from ?to)))
    :effect (and (box-at ?b ?to) (not (box-at ?b ?from))
                 (forall (?i - item) (when (in ?i ?b) (and (at ?i ?to) (not (at ?i ?from)))))
                 (increase (total-cost) (distance ?from ?to))))
  (:action flip :parameters (?l - light)
    :effect (and (when (on ?l) (not (on ?l))) (when (not (on ?l)) (on ?l))))
  (:action refresh :parameters ()
    :precondition (forall (?i - item) (exists (?r - room) (at ?i ?r)))
    :effect (and (not (ready)) (ready))))"""
BOX_PROBLEM = """(define (problem p) (:domain box)
  (:objects b1 b2 - ball  tool - item  r1 r2 r3 - room  bx - box  lamp - light)
  (:init (at b1 r1) (at b2 r1) (at tool r1) (box-at bx r1) (connected r1 r2) (connected r3 r2)
         (= (distance r1 r2) 4) (= (distance r2 r3) 7) (= (distance r3 r2) 7) (= (distance r2 r1) 4))
  (:goal (and (at b1 r3) (at b2 r3) (at tool r1) (not (on lamp))))
  (:metric minimize (total-cost)))"""


@pytest.fixture(scope="module")
def blocks() -> Task:
    return parse_task(BLOCKS, BLOCKS_PROBLEM)


@pytest.fixture(scope="module")
def box() -> Task:
    return parse_task(BOX, BOX_PROBLEM)


def test_correct_plan_validates(blocks: Task) -> None:
    result = validate_plan(blocks, plan_of("(pick-up b) (stack b c) (pick-up a) (stack a b)"))
    assert result.ok and result.problem == "" and result.failed_step is None and result.missing == []
    assert Atom("on", ("a", "b")) in result.final_state and Atom("on", ("b", "c")) in result.final_state
    assert result.cost == 4.0
    assert goal_reached(blocks, result.final_state) and unmet_goals(blocks, result.final_state) == []


def test_precondition_failure_names_step_and_atoms(blocks: Task) -> None:
    result = validate_plan(blocks, plan_of("(pick-up b) (stack b c) (stack a c)"))
    assert not result.ok
    assert (result.problem, result.failed_step, result.missing) == ("precondition", 3, ["(holding a)", "(clear c)"])
    assert result.message == "step 3 (stack a c): preconditions (holding a), (clear c) do not hold"
    assert result.cost == 2.0  # the two steps that applied
    assert Atom("on", ("b", "c")) in result.final_state  # the state before the failing step


def test_single_missing_precondition_message(blocks: Task) -> None:
    result = validate_plan(blocks, plan_of("(pick-up a) (pick-up b)"))
    assert result.failed_step == 2 and result.missing == ["(handempty)"]
    assert result.message == "step 2 (pick-up b): precondition (handempty) does not hold"


def test_goal_failure_lists_unmet_goals(blocks: Task) -> None:
    result = validate_plan(blocks, plan_of("(pick-up a) (stack a b)"))
    assert (result.ok, result.problem, result.failed_step) == (False, "goal", None)
    assert result.missing == ["(on b c)"]
    assert result.message == "goal not reached after 2 steps: (on b c) does not hold"
    empty = validate_plan(blocks, [])
    assert empty.missing == ["(on a b)", "(on b c)"]
    assert empty.message == "goal not reached after 0 steps: (on a b), (on b c) do not hold"


@pytest.mark.parametrize(
    "step, problem, fragment",
    [
        ("(stak a b)", "unknown-action", "unknown action 'stak'; did you mean 'stack'?"),
        ("(stack a)", "wrong-arity", "action 'stack' expects 2 arguments (?x - block ?y - block), got 1"),
        ("(pick-up a b)", "wrong-arity", "action 'pick-up' expects 1 argument (?x - block), got 2"),
        ("(pick-up d)", "unknown-object", "unknown object 'd' (argument 1 of pick-up)"),
    ],
)
def test_ill_formed_steps(blocks: Task, step: str, problem: str, fragment: str) -> None:
    result = validate_plan(blocks, plan_of("(pick-up b) (stack b c) " + step))
    assert (result.ok, result.problem, result.failed_step) == (False, problem, 3)
    assert result.message == f"step 3 {step}: {fragment}"
    assert check_action(blocks, plan_of(step)[0]) == fragment
    assert not applicable(blocks, blocks.problem.init, plan_of(step)[0])


def test_wrong_type_and_subtypes(box: Task) -> None:
    message = check_action(box, GroundAction("push", ("bx", "r1", "lamp")))
    assert message == "object 'lamp' is of type 'light', but argument 3 (?to) of push must be of type 'room'"
    result = validate_plan(box, [GroundAction("flip", ("r1",))])
    assert (result.problem, result.failed_step) == ("wrong-type", 1)
    # a ball is an item: subtypes are accepted where the supertype is expected
    assert check_action(box, GroundAction("put-in", ("b1", "bx", "r1"))) is None


def test_forall_conditional_effect_moves_only_what_is_inside(box: Task) -> None:
    state = apply(box, box.problem.init, GroundAction("put-in", ("b1", "bx", "r1")))
    state = apply(box, state, GroundAction("push", ("bx", "r1", "r2")))
    assert Atom("at", ("b1", "r2")) in state and Atom("at", ("b1", "r1")) not in state
    assert Atom("at", ("b2", "r1")) in state and Atom("at", ("tool", "r1")) in state  # not in the box
    assert Atom("box-at", ("bx", "r2")) in state


def test_conditional_effects_read_the_old_state(box: Task) -> None:
    once = apply(box, box.problem.init, GroundAction("flip", ("lamp",)))
    assert Atom("on", ("lamp",)) in once  # sequential evaluation would switch it on and off again
    twice = apply(box, once, GroundAction("flip", ("lamp",)))
    assert Atom("on", ("lamp",)) not in twice


def test_delete_then_add_leaves_atom_true(box: Task) -> None:
    state = apply(box, box.problem.init, GroundAction("refresh", ()))
    assert Atom("ready") in state
    assert apply(box, box.problem.init, GroundAction("flip", ("lamp",))) is not box.problem.init  # a new state


def test_box_plan_costs_and_goal_with_negation(box: Task) -> None:
    plan = plan_of("(put-in b1 bx r1) (put-in b2 bx r1) (push bx r1 r2) (push bx r2 r3) (flip lamp) (flip lamp)")
    result = validate_plan(box, plan)
    assert result.ok, result.message
    assert result.cost == 1 + 1 + 4 + 7 + 0 + 0 == plan_cost(box, plan)
    lit = validate_plan(box, plan[:-1])  # the lamp is left on
    assert (lit.problem, lit.missing) == ("goal", ["(not (on lamp))"])


def test_disjunction_and_equality_reported_whole(box: Task) -> None:
    action = GroundAction("push", ("bx", "r1", "r3"))
    assert unsatisfied_preconditions(box, box.problem.init, action) == ["(or (connected r1 r3) (connected r3 r1))"]
    action = GroundAction("push", ("bx", "r1", "r1"))
    assert unsatisfied_preconditions(box, box.problem.init, action) == [
        "(or (connected r1 r1) (connected r1 r1))",
        "(not (= r1 r1))",
    ]
    assert unsatisfied_preconditions(box, box.problem.init, GroundAction("push", ("bx", "r1", "r2"))) == []


def test_forall_precondition_reports_failing_instances(box: Task) -> None:
    state = frozenset(a for a in box.problem.init if a != Atom("at", ("b2", "r1")))
    assert not applicable(box, state, GroundAction("refresh", ()))
    assert unsatisfied_preconditions(box, state, GroundAction("refresh", ())) == ["(exists (?r - room) (at b2 ?r))"]


def test_holds_covers_every_connective(box: Task) -> None:
    init = box.problem.init
    x = Parameter("?x", "item")
    r = Parameter("?r", "room")
    assert holds(Atom("at", ("?i", "r1")), init, box, {"?i": "tool"})
    assert not holds(Not(Atom("at", ("b1", "r1"))), init, box)
    assert holds(Or((Atom("ready"), Atom("at", ("b1", "r1")))), init, box)
    assert holds(Imply(Atom("ready"), Atom("nothing")), init, box)
    assert not holds(Imply(Atom("at", ("b1", "r1")), Atom("at", ("b1", "r2"))), init, box)
    assert holds(Equals("?a", "b1"), init, box, {"?a": "b1"}) and not holds(Equals("b1", "b2"), init, box)
    assert holds(Forall((x,), Atom("at", ("?x", "r1"))), init, box)  # items include the balls (subtype)
    assert not holds(Forall((x,), Atom("at", ("?x", "r2"))), init, box)
    assert holds(Exists((r,), And((Atom("box-at", ("bx", "?r")), Not(Equals("?r", "r2"))))), init, box)
    assert not holds(Exists((r,), And((Atom("box-at", ("bx", "?r")), Equals("?r", "r3")))), init, box)


def test_custom_initial_state(blocks: Task) -> None:
    start = frozenset(
        {
            Atom("on", ("b", "c")),
            Atom("ontable", ("c",)),
            Atom("ontable", ("a",)),
            Atom("clear", ("a",)),
            Atom("clear", ("b",)),
            Atom("handempty"),
        }
    )
    assert validate_plan(blocks, plan_of("(pick-up a) (stack a b)"), init=start).ok
    assert not validate_plan(blocks, plan_of("(pick-up a) (stack a b)")).ok


def test_apply_rejects_ill_formed_action_and_keeps_input(blocks: Task) -> None:
    with pytest.raises(ValueError, match="unknown action 'fly'"):
        apply(blocks, blocks.problem.init, GroundAction("fly", ()))
    before = blocks.problem.init
    after = apply(blocks, before, GroundAction("pick-up", ("a",)))
    assert Atom("holding", ("a",)) in after and Atom("holding", ("a",)) not in before


def test_hand_built_model_task_without_parser() -> None:
    """The validator works on model objects however they were made (JSON, Python), not only parsed PDDL."""
    light = Parameter("?l", "light")
    domain = Domain(
        "lights",
        types=(("light", "object"),),
        predicates=(),
        actions=(
            ActionSchema("switch-on", (light,), Not(Atom("on", ("?l",))), (Effect(Atom("on", ("?l",))),), cost=3.0),
            ActionSchema("all-on", (), Forall((light,), Atom("on", ("?l",))), (Effect(Atom("done")),)),
        ),
    )
    problem = Problem("p", "lights", (("l1", "light"), ("l2", "light")), frozenset(), goal=Atom("done"))
    task = Task(domain, problem)
    early = validate_plan(task, plan_of("(switch-on l1) (all-on)"))
    assert (early.failed_step, early.missing) == (2, ["(on l2)"])
    done = validate_plan(task, plan_of("(switch-on l1) (switch-on l2) (all-on)"))
    assert done.ok and done.cost == 6.0 == plan_cost(task, plan_of("(switch-on l1) (switch-on l2) (all-on)"))
    assert isinstance(done, Validation)


# ---- IPC tasks, plans from Fast Downward lama-first ----------------------------------------------------

BLOCKS_4_0 = "(pick-up b) (stack b a) (pick-up c) (stack c b) (pick-up d) (stack d c)"
GRIPPER_01 = (
    "(pick ball1 rooma left) (pick ball2 rooma right) (move rooma roomb) (drop ball1 roomb left) "
    "(drop ball2 roomb right) (move roomb rooma) (pick ball3 rooma left) (pick ball4 rooma right) "
    "(move rooma roomb) (drop ball3 roomb left) (drop ball4 roomb right)"
)
ELEVATORS_01 = (
    "(move-up-slow slow1-0 n4 n5) (move-down-slow slow0-0 n4 n1) (board p1 slow0-0 n1 n0 n1) "
    "(move-down-slow slow0-0 n1 n0) (board p3 slow0-0 n0 n1 n2) (move-up-slow slow0-0 n0 n2) "
    "(leave p3 slow0-0 n2 n2 n1) (move-up-slow slow0-0 n2 n3) (board p0 slow0-0 n3 n1 n2) "
    "(move-up-slow slow0-0 n3 n4) (leave p0 slow0-0 n4 n2 n1) (leave p1 slow0-0 n4 n1 n0) "
    "(move-up-slow slow1-0 n5 n7) (board p2 slow1-0 n7 n0 n1) (move-down-slow slow1-0 n7 n4) "
    "(board p1 slow1-0 n4 n1 n2) (move-up-slow slow1-0 n4 n5) (leave p1 slow1-0 n5 n2 n1) "
    "(move-up-slow slow1-0 n5 n6) (leave p2 slow1-0 n6 n1 n0)"
)


@pytest.mark.parametrize(
    "domain, problem, plan, cost",
    [
        ("blocks", "probBLOCKS-4-0.pddl", BLOCKS_4_0, 6.0),
        ("gripper", "prob01.pddl", GRIPPER_01, 11.0),
        ("elevators-sat08-strips", "p01.pddl", ELEVATORS_01, 66.0),
    ],
)
def test_ipc_plans_validate_with_costs(domain: str, problem: str, plan: str, cost: float) -> None:
    task = ipc_task(domain, problem)
    result = validate_plan(task, plan_of(plan))
    assert result.ok, result.message
    assert result.cost == cost == plan_cost(task, plan_of(plan))


def test_ipc_swapped_steps_fail_at_the_right_step() -> None:
    task = ipc_task("blocks", "probBLOCKS-4-0.pddl")
    steps = plan_of(BLOCKS_4_0)
    steps[2], steps[3] = steps[3], steps[2]  # stack c b before picking c up
    result = validate_plan(task, steps)
    assert (result.problem, result.failed_step) == ("precondition", 3)
    assert result.missing == ["(holding c)"]
    assert result.message == "step 3 (stack c b): precondition (holding c) does not hold"


def test_ipc_truncated_plan_misses_goals() -> None:
    task = ipc_task("gripper", "prob01.pddl")
    result = validate_plan(task, plan_of(GRIPPER_01)[:5])
    assert result.problem == "goal" and result.failed_step is None
    assert result.missing == ["(at ball4 roomb)", "(at ball3 roomb)"]  # in the problem's goal order


def test_ipc_wrong_type_in_elevators() -> None:
    task = ipc_task("elevators-sat08-strips", "p01.pddl")
    message = check_action(task, GroundAction("move-up-slow", ("fast0", "n0", "n1")))
    assert message is not None and "object 'fast0' is of type 'fast-elevator'" in message
    assert "must be of type 'slow-elevator'" in message
