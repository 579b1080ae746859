"""What a generated world is made of, shared by the world types' modules: an `Episode` (one task's origin,
destination, situation and cargo), `WorldData` (places, vehicles, roads and what fails) and the ring-with-chords
road graph several types draw.

`family.World` adds what a world does (episodes, tasks, the hidden probabilities) on top of `WorldData`,
dispatching to the modules of the world types (`delivery.py`, `tools.py`); those modules build and read
`WorldData` and `Episode` from here, so they never import `family` back.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Episode:
    index: int
    origin: str
    dest: str
    context: dict[str, str]
    task_seed: int = 0  # `tools` worlds: the bundled task's (size, seed)
    size: int = 0
    cargo: tuple[tuple[str, str, str], ...] = ()  # delivery worlds: (package, from, to)
    starts: tuple[tuple[str, str], ...] = ()  # delivery worlds: (truck, place)


@dataclass
class WorldData:
    kind: str
    seed: int
    places: tuple[str, ...]
    vehicles: dict[str, str]  # name -> type
    roads: frozenset[tuple[str, str]]
    lengths: dict[frozenset, int] | None = None
    bad: dict = field(default_factory=dict)  # what fails: grounded drives, vehicles, roads, ...
    _tasks: dict = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.seed}"


def ring_roads(rng: random.Random, n: int) -> frozenset[tuple[str, str]]:
    """Roads p0..p{n-1}: a ring plus n/3 random chords (so there is always a way round), every road both ways."""
    places = [f"p{i}" for i in range(n)]
    edges = {frozenset((places[i], places[(i + 1) % n])) for i in range(n)}
    while len(edges) < n + n // 3:
        a, b = rng.sample(places, 2)
        edges.add(frozenset((a, b)))
    return frozenset((a, b) for edge in edges for a in edge for b in edge if a != b)


def problem_text(name: str, domain: str, objects: str, init: list[str], goal: str, metric: bool = False) -> str:
    """A PDDL problem of the world types' tasks: `init` literals, a conjunctive `goal` (the literals' text),
    with `metric` the total cost minimised."""
    return (
        f"(define (problem {name}) (:domain {domain}) (:objects {objects})\n"
        f"  (:init {' '.join(init)})\n  (:goal (and {goal})){' (:metric minimize (total-cost))' if metric else ''})"
    )
