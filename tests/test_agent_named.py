"""Named bindings: parameters bound by name and type, several objects of a type on the blackboard, named
outputs, and named facts (`pre=` / `post=`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from domains.ground_text import parse_ground_action
from domains.model import Atom
from domains.typed_actions import ReplanRequested, TypedActionError, action, compile_actions, fact, named_fact
from domains.validate import validate_plan
from portfolio.agent import Agent


@dataclass
class City:
    name: str


@dataclass
class Query:
    text: str


@dataclass
class Ticket:
    route: str


@dataclass
class Document:
    text: str


@dataclass
class Receipt:
    text: str


@action(goal=True)
def route(source: City, target: City) -> Ticket:
    return Ticket(f"{source.name} -> {target.name}")


@action(outputs=["target"])
def geocode(q: Query) -> City:
    return City(q.text.title())


def valid(agent: Agent, result, goal, start) -> bool:
    steps = [parse_ground_action(s.action) for s in result.steps if s.outcome == "success"]
    return validate_plan(agent.compiled(goal, start, ()), steps, init=start).ok


def test_keyword_inputs_bind_by_name():
    async def main():
        with Agent([route], warm=False) as agent:
            there = await agent.arun(source=City("Oslo"), target=City("Rome"), goal=Ticket)
            back = await agent.arun(source=City("Rome"), target=City("Oslo"), goal=Ticket)
        return there, back

    there, back = asyncio.run(main())
    assert there.output == Ticket("Oslo -> Rome") and back.output == Ticket("Rome -> Oslo")


def test_positional_inputs_still_bind_by_type():
    with Agent([route], warm=False) as agent:
        result = agent.run(City("Oslo"), goal=Ticket)
        task = agent.compiled(Ticket, frozenset({fact(City)}))
    assert result.output == Ticket("Oslo -> Oslo")  # one object per type: both parameters get the latest City
    assert {p.name for p in task.domain.predicates} == {"known-city", "known-ticket"}


def test_named_preconditions_and_outputs_compile_to_named_facts():
    task = compile_actions([route, geocode], [Ticket], [named_fact("source", City), fact(City)], names=["source"])
    schemas = {s.name: s for s in task.domain.actions}
    assert set(schemas["route"].precondition.parts) == {Atom("known-source_city"), Atom("known-target_city")}
    assert {e.atom for e in schemas["geocode"].effects} == {Atom("known-city"), Atom("known-target_city")}


def test_a_named_output_feeds_the_parameter_of_that_name():
    with Agent([route, geocode], warm=False) as agent:
        result = agent.run(Query("rome"), source=City("Oslo"), goal=Ticket)
        start = frozenset({fact(Query), fact(City), named_fact("source", City)})
        assert valid(agent, result, Ticket, start)
    assert result.output == Ticket("Oslo -> Rome")
    assert [s.action for s in result.steps] == ["(geocode)", "(route)"]


def test_a_parameter_whose_name_is_not_known_binds_by_type():
    with Agent([route], warm=False) as agent:
        result = agent.run(City("Rome"), source=City("Oslo"), goal=Ticket)  # no object is named `target`
    assert result.output == Ticket("Oslo -> Oslo")  # target: the latest City, which is the named one put last


def test_replan_requested_updates_a_named_object():
    calls = []

    @action(goal=True, outputs=["ticket"])
    def book(source: City, target: City) -> Ticket:
        calls.append(target.name)
        if target.name == "Rome":
            raise ReplanRequested("Rome is sold out", updates={"target": City("Milan")})
        return Ticket(f"{source.name} -> {target.name}")

    with Agent([book], warm=False) as agent:
        result = agent.run(source=City("Oslo"), target=City("Rome"), goal=Ticket)
    assert result.output == Ticket("Oslo -> Milan") and calls == ["Rome", "Milan"]
    assert [s.outcome for s in result.steps] == ["replan", "success"]


@action(post=["verified(doc)"])
def verify(doc: Document) -> None:
    return None


@action(goal=True, pre=["verified(doc)"], post=["published(doc)", "not draft(doc)"], side_effects=True)
def publish(doc: Document) -> Receipt:
    return Receipt(f"published {doc.text}")


def test_pre_and_post_named_facts_order_the_plan():
    task = compile_actions([verify, publish], [Receipt], [fact(Document), Atom("draft-document")])
    schemas = {s.name: s for s in task.domain.actions}
    assert Atom("verified-document") in schemas["publish"].precondition.parts
    assert {(e.atom.predicate, e.negated) for e in schemas["publish"].effects} >= {
        ("published-document", False),
        ("draft-document", True),
    }
    with Agent([publish, verify], warm=False) as agent:
        result = agent.run(Document("q3 report"), facts=["(draft-document)"], goal=Receipt)
    assert result.succeeded and [s.action for s in result.steps] == ["(verify)", "(publish)"]
    assert Atom("published-document") in result.state and Atom("draft-document") not in result.state


def test_named_facts_follow_named_bindings():
    @action(outputs=["doc"])
    def draft(q: Query) -> Document:
        return Document(q.text)

    task = compile_actions([draft, verify, publish], [Receipt], [fact(Query)])
    schemas = {s.name: s for s in task.domain.actions}
    assert Atom("verified-doc_document") in schemas["publish"].precondition.parts
    assert Atom("known-doc_document") in schemas["publish"].precondition.parts


def test_declaration_errors_are_precise():
    def two() -> tuple[City, City]: ...

    with pytest.raises(TypedActionError, match="outputs=\\['a'\\] names 1 values but the return type declares 2"):
        action(outputs=["a"])(two)
    with pytest.raises(TypedActionError, match="output names must be identifiers"):
        action(outputs=["a b", None])(two)
    with pytest.raises(TypedActionError, match="'paper', which is not one of doc"):
        action(pre=["verified(paper)"])(verify.fn)
    with pytest.raises(TypedActionError, match="cannot be negated"):
        action(pre=["not verified(doc)"])(verify.fn)

    @action(outputs=["place"])
    def other(q: Query) -> Query: ...

    @action(outputs=["place"])
    def where(q: Query) -> City: ...

    with pytest.raises(TypedActionError, match="output name 'place' is given to a Query and a City"):
        compile_actions([other, where], [City])
