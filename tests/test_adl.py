"""Every part of PDDL Fast Downward accepts, one small task per feature: read, written back, planned by the
cascade and validated; the validator's verdicts on hand-made plans; what `requirements_used` reports."""

from __future__ import annotations

import pytest

from domains.errors import UnsupportedFeatureError
from domains.model import Atom, GroundAction
from domains.pddl import parse_task
from domains.pddl_writer import domain_to_pddl, problem_to_pddl
from domains.validate import applicable, goal_reached, holds, validate_plan

EITHER = (
    """(define (domain pets)
  (:requirements :strips :typing)
  (:types cat dog - animal)
  (:predicates (hungry ?a - (either cat dog)) (fed ?a - (either cat dog)))
  (:action feed-cat :parameters (?c - cat) :precondition (hungry ?c) :effect (and (fed ?c) (not (hungry ?c))))
  (:action feed-dog :parameters (?d - dog) :precondition (hungry ?d) :effect (and (fed ?d) (not (hungry ?d)))))
""",
    """(define (problem p) (:domain pets) (:objects tom - cat rex - dog)
  (:init (hungry tom) (hungry rex)) (:goal (and (fed tom) (fed rex))))
""",
)

# Stratum 1: lit lamps and the transitive `powered` relation; stratum 2: `dark` negates `lit`. A single
# fixpoint over both strata would derive `dark` before `lit` and get it wrong.
AXIOMS = (
    """(define (domain lamps)
  (:requirements :strips :typing :derived-predicates :negative-preconditions :universal-preconditions)
  (:types node lamp)
  (:predicates (wire ?a ?b - node) (feeds ?n - node ?l - lamp) (source ?n - node) (powered ?n - node)
               (lit ?l - lamp) (dark) (switched-on ?n - node) (celebrated) (mourned))
  (:derived (powered ?n - node) (and (switched-on ?n) (source ?n)))
  (:derived (powered ?n - node) (exists (?m - node) (and (wire ?m ?n) (powered ?m))))
  (:derived (lit ?l - lamp) (exists (?n - node) (and (feeds ?n ?l) (powered ?n))))
  (:derived (dark) (forall (?l - lamp) (not (lit ?l))))
  (:action switch-on :parameters (?n - node) :precondition (not (switched-on ?n)) :effect (switched-on ?n))
  (:action connect :parameters (?a ?b - node) :precondition (not (wire ?a ?b)) :effect (wire ?a ?b))
  (:action mourn :parameters () :precondition (dark) :effect (mourned))
  (:action celebrate :parameters () :precondition (forall (?l - lamp) (lit ?l)) :effect (celebrated)))
""",
    """(define (problem p) (:domain lamps) (:objects n1 n2 n3 n4 - node l1 l2 - lamp)
  (:init (source n1) (wire n1 n2) (wire n3 n4) (feeds n2 l1) (feeds n4 l2))
  (:goal (and (mourned) (celebrated))))
""",
)

QUANTIFIED = (
    """(define (domain rooms)
  (:requirements :adl)
  (:types room key)
  (:predicates (locked ?r - room) (clean ?r - room) (holding ?k - key) (fits ?k - key ?r - room) (done))
  (:action unlock :parameters (?r - room)
    :precondition (exists (?k - key) (and (holding ?k) (fits ?k ?r)))
    :effect (not (locked ?r)))
  (:action take :parameters (?k - key) :precondition (not (holding ?k)) :effect (holding ?k))
  (:action clean-all :parameters ()
    :precondition (forall (?r - room) (not (locked ?r)))
    :effect (and (done) (forall (?r - room) (clean ?r)))))
""",
    """(define (problem p) (:domain rooms) (:objects r1 r2 - room k1 k2 - key)
  (:init (locked r1) (locked r2) (fits k1 r1) (fits k2 r2))
  (:goal (and (clean r1) (clean r2) (or (done) (not (done))))))
""",
)

CONDITIONAL = (
    """(define (domain paint)
  (:requirements :adl)
  (:types ball color)
  (:constants red - color)
  (:predicates (in-bucket ?b - ball) (painted ?b - ball ?c - color) (dry ?b - ball))
  (:action dip :parameters (?b - ball) :precondition (not (in-bucket ?b)) :effect (in-bucket ?b))
  (:action paint :parameters (?c - color)
    :effect (forall (?b - ball)
              (when (and (in-bucket ?b) (imply (= ?c red) (dry ?b)))
                    (and (painted ?b ?c) (not (in-bucket ?b)))))))
""",
    """(define (problem p) (:domain paint) (:objects b1 b2 - ball blue - color)
  (:init (dry b2))
  (:goal (and (painted b1 blue) (painted b2 red) (not (painted b1 red)))))
""",
)

CASES = {"either": EITHER, "axioms": AXIOMS, "quantified": QUANTIFIED, "conditional": CONDITIONAL}


@pytest.mark.parametrize("name", sorted(CASES))
def test_feature_task_is_planned_and_validated(planner, name: str) -> None:
    task = parse_task(*CASES[name])
    result = planner.plan(task)
    assert result.solved, result
    verdict = validate_plan(task, result.actions())
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("name", sorted(CASES))
def test_writer_round_trips_every_feature(name: str) -> None:
    task = parse_task(*CASES[name])
    again = parse_task(domain_to_pddl(task.domain), problem_to_pddl(task.problem))
    assert again.domain == task.domain and again.problem == task.problem


def test_axioms_are_evaluated_stratum_by_stratum() -> None:
    task = parse_task(*AXIOMS)
    init = task.problem.init
    assert holds(Atom("dark"), init, task)  # nothing is switched on
    assert not holds(Atom("powered", ("n2",)), init, task)
    on = init | {Atom("switched-on", ("n1",))}
    assert holds(Atom("powered", ("n2",)), on, task)  # through the wire n1 -> n2 (recursion)
    assert holds(Atom("lit", ("l1",)), on, task) and not holds(Atom("dark"), on, task)  # negation sees stratum 1
    assert not holds(Atom("lit", ("l2",)), on, task)
    assert applicable(task, init, GroundAction("mourn")) and not applicable(task, on, GroundAction("mourn"))


def test_validator_explains_a_failed_derived_precondition() -> None:
    task = parse_task(*AXIOMS)
    plan = [GroundAction("mourn"), GroundAction("switch-on", ("n1",)), GroundAction("celebrate")]
    verdict = validate_plan(task, plan)
    assert not verdict.ok and verdict.failed_step == 3 and verdict.missing == ["(lit l2)"]
    fixed = plan[:2] + [GroundAction("connect", ("n2", "n3")), GroundAction("celebrate")]
    assert validate_plan(task, fixed).ok
    assert goal_reached(task, validate_plan(task, fixed).final_state)


def test_conditional_effect_uses_the_state_before_the_action() -> None:
    task = parse_task(*CONDITIONAL)
    plan = [GroundAction("dip", ("b1",)), GroundAction("dip", ("b2",)), GroundAction("paint", ("red",))]
    state = validate_plan(task, plan).final_state
    # b1 is not dry: red does not take; b2 is: painted red and out of the bucket.
    assert Atom("painted", ("b2", "red")) in state and Atom("in-bucket", ("b2",)) not in state
    assert Atom("painted", ("b1", "red")) not in state and Atom("in-bucket", ("b1",)) in state


def test_either_members_are_accepted_where_declared() -> None:
    task = parse_task(*EITHER)
    assert task.is_of_type("rex", "(either cat dog)") and not task.is_of_type("rex", "(either cat)")


@pytest.mark.parametrize(
    "name,expected",
    [
        ("either", {":strips", ":typing", "either"}),
        (
            "axioms",
            {
                ":strips",
                ":typing",
                ":derived-predicates",
                ":negative-preconditions",
                ":existential-preconditions",
                ":universal-preconditions",
            },
        ),
        (
            "quantified",
            {
                ":strips",
                ":typing",
                ":negative-preconditions",
                ":existential-preconditions",
                ":universal-preconditions",
                ":conditional-effects",
                ":disjunctive-preconditions",
            },
        ),
        (
            "conditional",
            {
                ":strips",
                ":typing",
                ":negative-preconditions",
                ":conditional-effects",
                ":disjunctive-preconditions",
                ":equality",
            },
        ),
    ],
)
def test_requirements_used_reads_the_task_not_its_declaration(name: str, expected: set[str]) -> None:
    task = parse_task(*CASES[name])
    assert task.requirements_used() == expected and not task.is_strips


def test_strips_task_is_strips_whatever_it_declares() -> None:
    domain = EITHER[0].replace("(either cat dog)", "animal").replace(":strips :typing", ":adl")
    task = parse_task(domain, EITHER[1])
    assert task.is_strips and task.requirements_used() == {":strips", ":typing"} and not task.has_axioms


def test_pyperplan_declines_what_it_cannot_read() -> None:
    from portfolio.delegates.pyperplan import Pyperplan

    task = parse_task(*AXIOMS)
    with Pyperplan() as delegate:
        assert not delegate.supports(task)  # the cascade records `unsupported` and spends no time on it
        assert ":derived-predicates" in delegate.decline_reason(task)


def test_typed_search_simulates_axioms_instead_of_bitmasks() -> None:
    import time

    from portfolio.delegates.typed_search import TypedSearch
    from portfolio.engine.results import PlanRequest, Status

    small = """(define (problem small) (:domain lamps) (:objects n1 n2 - node l1 - lamp)
      (:init (source n1) (wire n1 n2) (feeds n2 l1)) (:goal (and (mourned) (celebrated))))"""
    task = parse_task(AXIOMS[0], small)
    outcome = TypedSearch().solve(PlanRequest(task), time.monotonic() + 5)
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok


def test_numeric_fluents_stay_refused() -> None:
    domain = QUANTIFIED[0].replace(
        "(:action take :parameters (?k - key) :precondition (not (holding ?k)) :effect (holding ?k))",
        "(:action take :parameters (?k - key) :precondition (not (holding ?k)) "
        ":effect (and (holding ?k) (increase (weight) 1)))",
    )
    with pytest.raises(UnsupportedFeatureError) as info:
        parse_task(domain, QUANTIFIED[1], "d.pddl", "p.pddl")
    assert info.value.file == "d.pddl" and info.value.line == 8


def _naive_closure(task, state):
    """Derived atoms by brute force: every head grounding, bodies evaluated by plain enumeration on a set."""
    from itertools import product

    from domains.features import axiom_strata
    from domains.validate_compile import _compile_formula, _compiled

    compiled = _compiled(task)
    full = set(state)  # a plain set: quantifiers enumerate objects instead of joining
    for stratum in axiom_strata(task.domain):
        changed = True
        while changed:
            changed = False
            for axiom in (a for a in task.domain.axioms if a.head.predicate in stratum):
                domains = [task.objects_of_type(p.type) for p in axiom.parameters]
                for combo in product(*domains):
                    env = dict(zip((p.name for p in axiom.parameters), combo))
                    atom = Atom(axiom.head.predicate, tuple(env[a] for a in axiom.head.args))
                    if atom not in full and _compile_formula(axiom.body, compiled)(full, env):
                        full.add(atom)
                        changed = True
    return full


def test_joins_agree_with_plain_enumeration_on_random_states() -> None:
    import random

    from domains.validate_compile import _compiled

    task = parse_task(*AXIOMS)
    compiled = _compiled(task)
    objects = task.objects()
    basic = [Atom("wire", (a, b)) for a in objects for b in objects if objects[a] == objects[b] == "node"]
    basic += [Atom("switched-on", (n,)) for n in objects if objects[n] == "node"]
    basic += [Atom("feeds", (n, m)) for n in objects for m in objects if (objects[n], objects[m]) == ("node", "lamp")]
    rng = random.Random(7)
    for _ in range(60):
        state = frozenset(rng.sample(basic, rng.randint(0, 12))) | task.problem.init
        joined = compiled.closure(state)
        assert set(joined) == _naive_closure(task, state)


def test_goal_agenda_plans_every_feature_task() -> None:
    import time

    from portfolio.delegates.goal_agenda import GoalAgenda
    from portfolio.engine.results import PlanRequest, Status

    agenda = GoalAgenda()
    try:
        for name, (domain, problem) in CASES.items():
            task = parse_task(domain, problem)
            outcome = agenda.solve(PlanRequest(task), time.monotonic() + 20)
            assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok, (name, outcome)
    finally:
        agenda.close()
