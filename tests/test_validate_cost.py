"""The worst case of checking a plan, worked out before a step is checked (`domains.validate_cost`): the
bindings of every quantifier over its variables' objects, nested quantifiers multiplied, per step of the plan;
the atoms a quantified effect builds; with derived predicates, only the variables a join enumerates."""

from __future__ import annotations

from support import IPC, IPC_MORE

from domains.load import load_task
from domains.model import GroundAction
from domains.pddl import parse_task
from domains.validate_cost import count, validation_cost


def wedge(variables: int, objects: int, actions: str = "") -> str:
    names = " ".join(f"?x{i}" for i in range(1, variables + 1))
    return f"""(define (domain wedge) (:requirements :adl :typing) (:types obj)
  (:predicates (p ?x - obj) (q ?x ?y - obj) (done))
  (:action go :parameters () :precondition (forall ({names} - obj) (not (p ?x1))) :effect (done)){actions})"""


def problem(objects: int, typed: str = "obj") -> str:
    names = " ".join(f"o{i}" for i in range(objects))
    return f"(define (problem w) (:domain wedge) (:objects {names} - {typed}) (:init) (:goal (done)))"


def test_a_seven_variable_forall_over_50_objects_is_50_to_the_7th_per_step():
    task = parse_task(wedge(7, 50), problem(50), "domain", "problem")
    once = validation_cost(task, [GroundAction("go", ())])
    assert once.conditions >= 50**7 and once.conditions < 50**7 + 10
    assert once.largest is not None
    assert once.largest.describe() == (
        "forall (?x1 ?x2 ?x3 ?x4 ?x5 ?x6 ?x7 - obj) in the precondition of go: 50^7 = 7.8e11 bindings"
    )
    thrice = validation_cost(task, [GroundAction("go", ())] * 3)
    assert thrice.conditions >= 3 * 50**7 and thrice.largest is not None and thrice.largest.total == 3 * 50**7
    assert validation_cost(task, [GroundAction("fly", ())]).conditions < 10  # an unknown action stops the check


def test_nested_quantifiers_multiply_and_effects_count_their_atoms():
    actions = """
  (:action sweep :parameters (?a - obj)
    :precondition (forall (?x - obj) (exists (?y - obj) (or (q ?x ?y) (p ?a))))
    :effect (and (forall (?z - obj) (when (p ?z) (not (p ?z)))) (forall (?u ?v - obj) (q ?u ?v))))"""
    task = parse_task(wedge(1, 20, actions), problem(20), "domain", "problem")
    cost = validation_cost(task, [GroundAction("sweep", ("o1",))])
    precondition = 20 * 20 * 2  # both variables enumerated, two atoms in the body
    effects = 20 + 20 * 20  # the conditional effect's test for each binding, the 400 atoms
    assert precondition + effects <= cost.conditions < precondition + effects + 10
    assert cost.atoms == 400
    assert cost.largest is not None  # the outer quantifier of the nest, which counts the inner one's work
    assert cost.largest.describe() == "forall (?x - obj) in the precondition of sweep: 20 bindings"
    assert cost.largest.total == precondition


def test_a_type_counts_its_subtypes_objects():
    domain = wedge(2, 0).replace("(:types obj)", "(:types obj small - obj)")
    mixed = "(define (problem w) (:domain wedge) (:objects a b c - obj d e - small) (:init) (:goal (done)))"
    task = parse_task(domain, mixed, "domain", "problem")
    assert validation_cost(task, [GroundAction("go", ())]).largest.sizes == (5, 5)  # type: ignore[union-attr]


def test_with_derived_predicates_only_the_variables_a_join_enumerates_count():
    domain = """(define (domain d) (:requirements :adl :derived-predicates :typing) (:types obj)
  (:predicates (p ?x - obj) (r ?x ?y - obj) (near ?x - obj) (done))
  (:derived (near ?x - obj) (exists (?y - obj) (r ?x ?y)))
  (:action go :parameters () :precondition (exists (?x ?y ?z - obj) (and (r ?x ?y) (not (p ?z)))) :effect (done)))"""
    names = " ".join(f"o{i}" for i in range(30))
    task = parse_task(
        domain, f"(define (problem w) (:domain d) (:objects {names} - obj) (:init) (:goal (done)))", "d", "p"
    )
    cost = validation_cost(task, [GroundAction("go", ())])
    assert cost.largest is not None and cost.largest.sizes == (30,)  # ?z only: (r ?x ?y) binds the others
    assert cost.conditions < 30 * 10


def test_the_committed_ipc_tasks_cost_far_less_than_a_default_budget_allows():
    """The default --validate-budget (10 s) allows 1e7 conditions: no real task comes near, with a plan of 50
    steps of every action of its largest problem."""
    from portfolio.serve.validator import CONDITIONS_PER_S

    costs = {}
    for domain in sorted([*IPC.glob("*/domain.pddl"), *IPC_MORE.glob("*/domain.pddl")]):
        problems = sorted(
            (p for p in domain.parent.glob("*.pddl") if p.name != "domain.pddl"), key=lambda p: p.stat().st_size
        )
        if not problems:
            continue
        task = load_task(domain, problems[-1])
        plan = [GroundAction(schema.name, ()) for schema in task.domain.actions] * 50
        costs[domain.parent.name] = validation_cost(task, plan).conditions
    assert len(costs) >= 10 and max(costs.values()) < 10 * CONDITIONS_PER_S / 100, costs


def test_counts_read_as_people_read_them():
    assert [count(n) for n in (2500, 30_000_000, 781_250_000_000, 10**40)] == ["2,500", "3e7", "7.8e11", "1e40"]
