"""Seeded problem generators for the bundled domains.

Each generator builds an instance that is solvable by construction (the argument is in its docstring) and
depends only on `(size, seed)`: the same arguments always give the same text, on every platform, because all
randomness comes from one `random.Random(seed)` drawn in a fixed order.
"""

from __future__ import annotations

import random


def _problem(
    name: str, domain: str, objects: dict[str, list[str]], init: list[str], goal: list[str], metric: bool = False
) -> str:
    """PDDL problem text; `objects` maps each type to its objects, in order."""
    lines = [f"(define (problem {name})", f"  (:domain {domain})", "  (:objects"]
    lines += [f"    {' '.join(objs)} - {type_name}" for type_name, objs in objects.items() if objs]
    lines.append("  )")
    lines.append("  (:init")
    lines += [f"    {fact}" for fact in init]
    lines.append("  )")
    lines.append("  (:goal (and")
    lines += [f"    {fact}" for fact in goal]
    lines.append("  ))")
    if metric:
        lines.append("  (:metric minimize (total-cost))")
    lines.append(")")
    return "\n".join(lines) + "\n"


def _towers(blocks: list[str], rng: random.Random) -> list[list[str]]:
    """A random arrangement of `blocks` into towers (bottom first)."""
    order = blocks[:]
    rng.shuffle(order)
    towers: list[list[str]] = []
    for block in order:
        if not towers or rng.random() < 0.35:
            towers.append([block])
        else:
            towers[rng.randrange(len(towers))].append(block)
    return towers


def _tower_facts(towers: list[list[str]]) -> list[str]:
    facts = []
    for tower in sorted(towers):
        facts.append(f"(ontable {tower[0]})")
        facts += [f"(on {upper} {lower})" for lower, upper in zip(tower, tower[1:])]
    return facts


def blocksworld(size: int, seed: int) -> str:
    """Random initial towers, random goal towers (fully specified). Solvable: any arrangement is reachable by
    unstacking everything onto the table and building the goal towers bottom-up."""
    rng = random.Random(f"blocksworld-{size}-{seed}")
    blocks = [f"b{i}" for i in range(1, size + 1)]
    start = _towers(blocks, rng)
    goal = _towers(blocks, rng)
    for _ in range(20):  # prefer a goal that differs from the start when there is more than one block
        if size < 2 or sorted(map(tuple, goal)) != sorted(map(tuple, start)):
            break
        goal = _towers(blocks, rng)
    init = [f"(clear {tower[-1]})" for tower in sorted(start)] + _tower_facts(start) + ["(handempty)"]
    return _problem(f"blocksworld-{size}-{seed}", "blocksworld", {"block": blocks}, init, _tower_facts(goal))


def gripper(size: int, seed: int) -> str:
    """Balls scattered over rooms, each to be carried to a random other room. Solvable: the robot can move
    between any two rooms and carry one ball at a time in either gripper."""
    rng = random.Random(f"gripper-{size}-{seed}")
    rooms = [f"room{i}" for i in range(1, 2 + (size - 1) // 10 + 1)]
    balls = [f"ball{i}" for i in range(1, size + 1)]
    grippers = ["left", "right"]
    init = [f"(at-robby {rng.choice(rooms)})"] + [f"(free {g})" for g in grippers]
    goal = []
    for ball in balls:
        start = rng.choice(rooms)
        init.append(f"(at {ball} {start})")
        goal.append(f"(at {ball} {rng.choice([r for r in rooms if r != start])})")
    return _problem(
        f"gripper-{size}-{seed}", "gripper", {"room": rooms, "ball": balls, "gripper": grippers}, init, goal
    )


def logistics(size: int, seed: int) -> str:
    """Packages to move between locations of several cities. Solvable: every city has an airport and a truck
    that can drive between all its locations, and the airplanes can fly between all airports."""
    rng = random.Random(f"logistics-{size}-{seed}")
    n_cities = 2 + size // 8
    cities = [f"city{c}" for c in range(1, n_cities + 1)]
    airports, places, trucks = [], [], []
    init: list[str] = []
    city_locations: dict[str, list[str]] = {}
    for c, city in enumerate(cities, start=1):
        airport = f"apt{c}"
        others = [f"loc{c}-{k}" for k in range(1, rng.randint(1, 2) + 1)]
        airports.append(airport)
        places += others
        city_locations[city] = [airport, *others]
        init += [f"(in-city {loc} {city})" for loc in city_locations[city]]
        truck = f"truck{c}"
        trucks.append(truck)
        init.append(f"(at {truck} {rng.choice(city_locations[city])})")
    planes = [f"plane{i}" for i in range(1, 1 + size // 15 + 1)]
    init += [f"(at {plane} {rng.choice(airports)})" for plane in planes]
    every = airports + places
    packages = [f"pkg{i}" for i in range(1, size + 1)]
    goal = []
    for package in packages:
        start = rng.choice(every)
        init.append(f"(at {package} {start})")
        goal.append(f"(at {package} {rng.choice([loc for loc in every if loc != start])})")
    init.append("(= (total-cost) 0)")
    objects = {
        "city": cities,
        "airport": airports,
        "location": places,
        "truck": trucks,
        "airplane": planes,
        "package": packages,
    }
    return _problem(f"logistics-{size}-{seed}", "logistics", objects, init, goal, metric=True)


_TOPICS = [
    "pricing",
    "competitors",
    "regulation",
    "market-size",
    "supply-chain",
    "hiring",
    "patents",
    "security",
    "sustainability",
    "customer-churn",
]
_EXPERTS = ["ana", "ben", "chen", "dara", "eli", "fay"]


def tools(size: int, seed: int) -> str:
    """`size` report jobs on random topics. Every topic is indexed by at least one database and known by at
    least one expert, and the web engines cover everything, so each job has at least three distinct grounded
    routes to (report-written ?j): web search + fact-check, database (after one connect), or an expert; each
    then written up by a cheap or a strong writer."""
    rng = random.Random(f"tools-{size}-{seed}")
    n_topics = min(len(_TOPICS), 1 + (size + 1) // 2)
    topics = _TOPICS[:n_topics]
    engines = ["web-basic", "web-pro"]
    databases = ["db-internal", "db-news", "db-archive"][: 2 if size < 20 else 3]
    experts = [f"expert-{name}" for name in _EXPERTS[: 2 + size // 10]]
    writers = ["writer-small", "writer-large"]
    jobs = [f"job{i}" for i in range(1, size + 1)]
    init = [f"(about {job} {rng.choice(topics)})" for job in jobs]
    for holders, verb in ((databases, "indexes"), (experts, "knows")):
        covered: dict[str, set[str]] = {h: set() for h in holders}
        for topic in topics:  # each topic gets one guaranteed holder, then some extra coverage
            covered[rng.choice(holders)].add(topic)
            for holder in holders:
                if rng.random() < 0.3:
                    covered[holder].add(topic)
        init += [f"({verb} {h} {t})" for h in holders for t in topics if t in covered[h]]
    init += ["(= (search-cost web-basic) 1)", "(= (search-cost web-pro) 3)"]
    init += [f"(= (query-cost {d}) {rng.randint(2, 4)})" for d in databases]
    init += [f"(= (consult-cost {e}) {rng.randint(8, 15)})" for e in experts]
    init += ["(= (writing-cost writer-small) 1)", "(= (writing-cost writer-large) 4)", "(= (total-cost) 0)"]
    goal = [f"(report-written {job})" for job in jobs]
    objects = {
        "job": jobs,
        "topic": topics,
        "search-engine": engines,
        "database": databases,
        "expert": experts,
        "writer": writers,
    }
    return _problem(f"tools-{size}-{seed}", "tools", objects, init, goal, metric=True)


GENERATORS = {"blocksworld": blocksworld, "gripper": gripper, "logistics": logistics, "tools": tools}
