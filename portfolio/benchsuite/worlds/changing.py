"""The changing worlds of the family (`outage`, `degradation`, `flapping`): one road of the cheap route turns bad
and (except under degradation) good again, at episodes drawn from the seed.

    world = make_world("outage", 3)                # through family.make_world, which calls `layout`
    world.p_fail(step, world.episode(90))          # the truth of episode 90 (`p_fail` here)
    events(world, 200)                              # [(break episode, "break"), (recovery episode, "recovery")]

Layout (routes domain, `family.DOMAIN`): every episode drives from the origin `p0` to the destination `p1`. The
cheap route has 2-3 drives; a detour, disjoint from it, has 1-2 drives more; a third route, 3-4 drives longer
than the cheap one, gives the learner a dearer way round. 1-3 vehicles (van-b), every one starting at the origin.
The watched road is one road of the cheap route, drawn from the seed, bad for every vehicle in the direction the
route drives it; every other drive fails 2%.

- `outage`: the watched road fails 3% until a break episode drawn in [40, 80), then 80% for a window of 30-60
  episodes, then 3% again (so at least 60 episodes of 200 follow the recovery);
- `degradation`: 2% until a start drawn in [30, 70), then rising linearly over a span of 40-90 episodes to a
  top drawn in [0.6, 0.8], kept after; its break is the first episode whose truth makes the detour cheaper
  under the true costs (what the oracle minimises); no recovery;
- `flapping`: 3% until a first break drawn in [30, 50), then alternately 80% and 3%, each phase 25-40 episodes
  (drawn per phase).

Under the true costs (lam = 5) a drive at 3% costs 1.15 and one at 80% costs 9.05, so the detour (at most 2
drives longer: 2.3 dearer) is the oracle's plan while the road is bad and the cheap route while it is good;
under unit costs (cost-blind) the cheap route always is. `watched(world, step)` says whether a step drives the
watched road: what the leave/return measures (`adapt.py`) follow.
"""

from __future__ import annotations

import math
import random

from domains.model import GroundAction
from portfolio.benchsuite.worlds.model import Episode, WorldData

CHANGING_KINDS = ("outage", "degradation", "flapping")
GOOD_P = 0.03  # the watched road while it works (outage, flapping)
BAD_P = 0.8  # ... while it is broken
OTHER_P = 0.02  # every other drive; the watched road's start under degradation
HORIZON = 1000  # flapping phases are drawn this far ahead, whatever the run's length
LAM = 5.0  # the oracle's weight (runner.LAM), for the degradation break


def layout(kind: str, rng: random.Random) -> tuple[tuple[str, ...], dict[str, str], frozenset, None, dict]:
    """A changing world's (places, vehicles, roads, lengths, bad): what `family.make_world` builds its `World`
    from. `bad` holds the route (`origin`, `dest`, `cheap`: its places), the `watched` (from, to) road, the
    `detour_extra` drives and the schedule (`schedule`: (episode, p_fail at it) knots, read by `truth`)."""
    cheap_len = rng.choice((2, 3))
    extra = rng.choice((1, 2))
    long_extra = rng.choice((3, 4))
    names = iter(f"p{i}" for i in range(2, 40))
    cheap = ["p0", *(next(names) for _ in range(cheap_len - 1)), "p1"]
    detour = ["p0", *(next(names) for _ in range(cheap_len + extra - 1)), "p1"]
    longer = ["p0", *(next(names) for _ in range(cheap_len + long_extra - 1)), "p1"]
    edges = {frozenset(pair) for path in (cheap, detour, longer) for pair in zip(path, path[1:])}
    roads = frozenset((a, b) for edge in edges for a in edge for b in edge if a != b)
    places = tuple(sorted({p for path in (cheap, detour, longer) for p in path}, key=lambda p: int(p[1:])))
    vehicles = {f"v{i}": "van-b" for i in range(rng.choice((1, 2, 3)))}
    i = rng.randrange(cheap_len)
    bad: dict = {"origin": "p0", "dest": "p1", "cheap": tuple(cheap), "watched": (cheap[i], cheap[i + 1])}
    bad["detour_extra"] = extra
    if kind == "outage":
        start = rng.randrange(40, 80)
        end = start + rng.randint(30, 60)
        bad["schedule"] = ((0, GOOD_P), (start, BAD_P), (end, GOOD_P))
    elif kind == "flapping":
        knots, at, p = [(0, GOOD_P)], rng.randrange(30, 50), BAD_P
        while at < HORIZON:
            knots.append((at, p))
            at, p = at + rng.randint(25, 40), GOOD_P if p == BAD_P else BAD_P
        bad["schedule"] = tuple(knots)
    elif kind == "degradation":
        start = rng.randrange(30, 70)
        bad["ramp"] = (start, start + rng.randint(40, 90), OTHER_P, round(rng.uniform(0.6, 0.8), 3))
    else:
        raise ValueError(f"not a changing world kind: {kind!r}")
    return places, vehicles, roads, None, bad


def episode(world: WorldData, index: int, context: dict) -> Episode:
    """Every episode drives the same origin to the same destination: the cheap route is always the same."""
    return Episode(index, world.bad["origin"], world.bad["dest"], context)


def truth(world: WorldData, index: int) -> float:
    """The watched road's true p_fail in episode `index`."""
    if "ramp" in world.bad:
        start, end, low, high = world.bad["ramp"]
        if index < start:
            return low
        if index >= end:
            return high
        return low + (high - low) * (index - start) / (end - start)
    p = world.bad["schedule"][0][1]
    for at, value in world.bad["schedule"]:
        if at > index:
            break
        p = value
    return p


def watched(world: WorldData, step: GroundAction) -> bool:
    """Whether `step` drives the watched road (any vehicle, in the cheap route's direction)."""
    return step.name == "drive" and tuple(step.args[1:]) == world.bad["watched"]


def p_fail(world: WorldData, step: GroundAction, spec: Episode) -> float:
    if step.name != "drive":
        return 0.0
    return truth(world, spec.index) if watched(world, step) else OTHER_P


def events(world: WorldData, episodes: int) -> list[tuple[int, str]]:
    """(episode, "break" | "recovery") within the first `episodes`: when the watched road turns bad or good. Under
    degradation the break is the first episode where the road's true cost exceeds the detour's extra drives' (the
    oracle's plan changes there), none if the top is never that bad."""
    if "ramp" in world.bad:
        extra = world.bad["detour_extra"]

        def risk(p: float) -> float:
            return LAM * -math.log1p(-p)

        per_drive = 1 + risk(OTHER_P)
        for index in range(episodes):
            if risk(truth(world, index)) - risk(OTHER_P) > extra * per_drive:
                return [(index, "break")]
        return []
    out = []
    for at, p in world.bad["schedule"][1:]:
        if at < episodes:
            out.append((at, "break" if p == BAD_P else "recovery"))
    return out
