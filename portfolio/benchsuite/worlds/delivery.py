"""The delivery worlds of the family (`detours`, `vehicle-roads`): trucks carry packages along roads, with
handling steps around the drives, as a new user would write the domain (load, drive, unload; unit costs).

    world = make_world("detours", 3)      # through family.make_world, which calls `delivery_layout`
    spec = world.episode(5)               # spec.cargo: (package, from, to) per package; spec.starts: truck places

`detours`: two districts (west and east: a hub and 2-3 places each, joined to their hub) joined by a one-road
shortcut between the hubs that fails 75% for every truck, and by a detour of 3-5 roads (2-4 drives longer)
that fail 3%. Every package of an episode crosses: from a place of one district to a place of the other (the
direction drawn per episode). Under unit costs the shortcut is cheaper; under the true costs (lam = 5: 1 +
5 * -log 0.25 = 7.9 against at most 5 * (1 + 5 * 0.03) = 5.8) the detour is. Sizes from the seed: the detour's
length, 1-2 trucks, 1-2 packages, 2-3 places per district.
`vehicle-roads`: a ring of 6-9 places plus chords (as the routes worlds), 2-4 trucks, 1-2 packages; each truck
has its own bad roads (a quarter of the roads, both ways) where it fails 70%; elsewhere drives fail 2%.
Everywhere load and unload fail 1%. Trucks start, and packages start and end, at places drawn per episode.
"""

from __future__ import annotations

import random

from domains.model import GroundAction, Task
from portfolio.benchsuite.worlds.model import Episode, WorldData, problem_text, ring_roads

DELIVERY_KINDS = ("detours", "vehicle-roads")
SHORTCUT_P = 0.75  # `detours`: the hubs' direct road, for every truck
DETOUR_P = 0.03  # `detours`: each road of the reliable detour
TRUCK_ROAD_P = 0.7  # `vehicle-roads`: a truck on one of its own bad roads
DRIVE_P = 0.02  # any other drive
HANDLING_P = 0.01  # load, unload

DOMAIN = """(define (domain delivery)
  (:requirements :strips :typing)
  (:types place truck package)
  (:predicates (at ?t - truck ?p - place) (pkg-at ?k - package ?p - place) (in ?k - package ?t - truck)
               (road ?a - place ?b - place))
  (:action load :parameters (?k - package ?t - truck ?p - place)
    :precondition (and (at ?t ?p) (pkg-at ?k ?p)) :effect (and (in ?k ?t) (not (pkg-at ?k ?p))))
  (:action unload :parameters (?k - package ?t - truck ?p - place)
    :precondition (and (at ?t ?p) (in ?k ?t)) :effect (and (pkg-at ?k ?p) (not (in ?k ?t))))
  (:action drive :parameters (?t - truck ?a - place ?b - place)
    :precondition (and (at ?t ?a) (road ?a ?b)) :effect (and (at ?t ?b) (not (at ?t ?a)))))
"""


def _both_ways(edges) -> frozenset[tuple[str, str]]:
    return frozenset((a, b) for edge in edges for a in edge for b in edge if a != b)


def delivery_layout(kind: str, rng: random.Random) -> tuple[tuple[str, ...], dict[str, str], frozenset, None, dict]:
    """A delivery world's (places, trucks, roads, lengths, bad): what `family.make_world` builds its `World`
    from."""
    n_trucks = 1 + rng.randrange(2) if kind == "detours" else 2 + rng.randrange(3)
    trucks = {f"t{i}": "truck" for i in range(n_trucks)}
    bad: dict = {"packages": 1 + rng.randrange(2)}
    if kind == "detours":
        detour = 2 + rng.randrange(3)  # places on the detour: it is that many drives longer than the shortcut
        per_district = 2 + rng.randrange(2)
        west = ["w0", *(f"w{i}" for i in range(1, per_district + 1))]
        east = ["e0", *(f"e{i}" for i in range(1, per_district + 1))]
        middle = [f"d{i}" for i in range(1, detour + 1)]
        edges = {frozenset((hub, place)) for hub, district in (("w0", west), ("e0", east)) for place in district[1:]}
        chain = ["w0", *middle, "e0"]
        edges |= {frozenset(pair) for pair in zip(chain, chain[1:])}
        edges.add(frozenset(("w0", "e0")))
        bad |= {
            "shortcut": frozenset(("w0", "e0")),
            "detour": frozenset(frozenset(p) for p in zip(chain, chain[1:])),
            "districts": (tuple(west), tuple(east)),
        }
        places = tuple(west + middle + east)
        roads = _both_ways(edges)
    else:
        places = tuple(f"p{i}" for i in range(6 + rng.randrange(4)))
        roads = ring_roads(rng, len(places))
        ring = sorted({frozenset(r) for r in roads}, key=sorted)
        bad["truck_roads"] = {t: frozenset(rng.sample(ring, max(1, len(ring) // 4))) for t in sorted(trucks)}
    return places, trucks, roads, None, bad


def episode(world: WorldData, index: int, rng: random.Random, context: dict) -> Episode:
    n = world.bad["packages"]
    if world.kind == "detours":
        start, end = world.bad["districts"]
        if rng.random() < 0.5:
            start, end = end, start
        cargo = tuple((f"k{i}", rng.choice(start[1:]), rng.choice(end[1:])) for i in range(n))
        starts = tuple((t, rng.choice(start)) for t in sorted(world.vehicles))
    else:
        pairs = [rng.sample(world.places, 2) for _ in range(n)]
        cargo = tuple((f"k{i}", a, b) for i, (a, b) in enumerate(pairs))
        starts = tuple((t, rng.choice(world.places)) for t in sorted(world.vehicles))
    return Episode(index, cargo[0][1], cargo[0][2], context, cargo=cargo, starts=starts)


def task(world: WorldData, spec: Episode) -> Task:
    from domains.pddl import parse_task

    objects = (
        " ".join(world.places)
        + " - place "
        + " ".join(sorted(world.vehicles))
        + " - truck "
        + " ".join(k for k, _, _ in spec.cargo)
        + " - package"
    )
    init = [f"(at {t} {p})" for t, p in spec.starts] + [f"(pkg-at {k} {a})" for k, a, _ in spec.cargo]
    init += [f"(road {a} {b})" for a, b in sorted(world.roads)]
    goal = " ".join(f"(pkg-at {k} {b})" for k, _, b in spec.cargo)
    name = f"{world.name}-e{spec.index}"
    problem = problem_text(name, "delivery", objects, init, goal)
    return parse_task(DOMAIN, problem, f"{world.name}.domain", f"{name}.problem")


def p_fail(world: WorldData, step: GroundAction) -> float:
    """The hidden probability that `step` fails (no situation dependence in these worlds)."""
    if step.name != "drive":
        return HANDLING_P
    truck, a, b = step.args
    road = frozenset((a, b))
    if world.kind == "detours":
        if road == world.bad["shortcut"]:
            return SHORTCUT_P
        return DETOUR_P if road in world.bad["detour"] else DRIVE_P
    return TRUCK_ROAD_P if road in world.bad["truck_roads"].get(truck, ()) else DRIVE_P
