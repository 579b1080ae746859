"""Simulated unreliable tools for a research agent, as typed actions: the example behind `make demo`.

The agent gets a `Request` ("a short write-up about <person>") and must produce a `WriteUp`:

    find_person      Request -> Person     directory lookup, reliable
    fetch_wire       Person  -> News       cheap news wire (cost 1.0) that times out most of the time
    fetch_archive    Person  -> News       dearer archive (cost 1.5), reliable
    write_up         Person, News -> WriteUp   (the goal action)

With base costs the planner picks the wire; it times out (a transient failure: retried, then refined away) and
the agent replans to the archive within the run. Its failures land in the trace store, the failure model learns
that the wire fails, and after a few runs learned costs make the archive the first choice. Everything is seeded,
so a given (seed, outage) always plays out the same way. Pure: no `portfolio` imports.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from domains.typed_actions import TypedAction, action


@dataclass(frozen=True)
class Request:
    text: str


@dataclass(frozen=True)
class Person:
    name: str


@dataclass(frozen=True)
class News:
    source: str
    headlines: tuple[str, ...]


@dataclass(frozen=True)
class WriteUp:
    text: str


def make_tools(seed: int = 0, outage: float = 0.8) -> list[TypedAction]:
    """The four actions, with the wire failing with probability `outage` on each call (seeded)."""
    rng = random.Random(seed)

    @action(cost=1.0)
    def find_person(request: Request) -> Person:
        words = [w.strip(".,") for w in request.text.split() if w[:1].isupper()]
        if not words:
            raise LookupError(f"no name in {request.text!r}")
        return Person(" ".join(words[-2:]))

    @action(cost=1.0)
    def fetch_wire(person: Person) -> News:
        if rng.random() < outage:
            raise TimeoutError("news wire did not answer within 2 s")
        return News("wire", (f"{person.name} opens new lab", f"{person.name} wins award"))

    @action(cost=1.5)
    def fetch_archive(person: Person) -> News:
        return News("archive", (f"{person.name}: a profile",))

    @action(cost=1.0, goal=True)
    def write_up(person: Person, news: News) -> WriteUp:
        return WriteUp(f"{person.name} in the news ({news.source}): " + "; ".join(news.headlines))

    return [find_person, fetch_wire, fetch_archive, write_up]


__all__ = ["News", "Person", "Request", "WriteUp", "make_tools"]
