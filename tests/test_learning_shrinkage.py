"""Sparse and lopsided evidence still lands where it belongs: failures in one situation go to the object that
failed there, a few bad groundings among many fine ones keep their weight, a lone grounding's failures stay
mostly its own, and one or two lucky steps do not price a cell.

Each test is a shape met in a benchmark world, with what the estimate gave before its fix in the docstring.
Apart from `tests/test_learning_estimator.py` (consistency, generalisation, exploration, the stored format),
which keeps the `rec` helper they share.
"""

from __future__ import annotations

import random

import pytest
from support import rec

from domains.model import GroundAction
from learning import FailureModel


@pytest.mark.parametrize("seed", range(10))
def test_failures_in_a_situation_go_to_the_object_that_failed_there(seed: int) -> None:
    """The tools world's shape: the cheap engine fails 80% at peak hours (40 steps there, over many job x topic x
    weather cells) and 4% off-peak; the other engine was only ever tried off-peak. A new job at peak must start
    pessimistic on the cheap engine and not on the other one: before tokens were shrunk by what their families
    explain and situations entered through objects only, the other engine took the blame for peak hours
    (p_fail 0.19-0.57 where it fails 1%), so it was never tried there, and the cheap one started at 0.57-0.59 in
    three seeds in ten."""
    rng = random.Random(seed)
    jobs, topics, steps = [f"job{i}" for i in range(8)], ["pricing", "patents", "hiring"], []
    for engine, hour, p, count in (
        ("web-basic", "off-peak", 0.04, 300),
        ("web-basic", "peak", 0.8, 40),
        ("web-pro", "off-peak", 0.01, 40),
    ):
        for _ in range(count):
            action = GroundAction("web-search", (rng.choice(jobs), rng.choice(topics), engine))
            steps.append(
                rec(len(steps), action, rng.random() < p, hour=hour, weather=rng.choice(["sun", "rain", "fog"]))
            )
    model = FailureModel().fit(steps)
    basic, pro = model.predict_proba(
        [
            GroundAction("web-search", ("job-new", "pricing", "web-basic")),
            GroundAction("web-search", ("job-new", "pricing", "web-pro")),
        ],
        {"hour": "peak", "weather": "sun"},
    )
    assert basic > 0.6
    assert pro < 0.15


@pytest.mark.parametrize("seed", range(10))
def test_a_few_bad_roads_among_many_keep_their_weight(seed: int) -> None:
    """Three bad roads (70%) among forty fine ones (2%), driven both ways by four vehicles: a new vehicle on a bad
    road starts pessimistic. The road family's variance is set by the many fine roads; with a Gaussian prior
    around it alone the three were shrunk with them (the least pessimistic 0.28-0.43 over these seeds), with one
    variance for every token 0.30-0.55, with the Student-t around the family's (`learning.families`) 0.45-0.69."""
    rng = random.Random(seed)
    places = [f"p{i}" for i in range(12)]
    roads = [(a, b) for i, a in enumerate(places) for b in places[i + 1 :]][:40]
    bad = set(rng.sample(roads, 3))
    steps = []
    for _ in range(3000):
        a, b = rng.choice(roads)
        p = 0.7 if (a, b) in bad else 0.02
        a, b = (b, a) if rng.random() < 0.5 else (a, b)
        steps.append(
            rec(
                len(steps),
                GroundAction("drive", (f"v{rng.randrange(4)}", a, b)),
                rng.random() < p,
                weather=rng.choice(["sun", "rain"]),
            )
        )
    model = FailureModel().fit(steps)
    new = model.predict_proba([GroundAction("drive", ("v-new", a, b)) for a, b in sorted(bad)], {"weather": "sun"})
    assert min(new) > 0.42


@pytest.mark.parametrize("seed", range(10))
def test_a_few_failures_are_not_drowned_where_most_groundings_agree_with_the_prior(seed: int) -> None:
    """Sixty fine drives (2%) and one grounding whose objects nothing else has, failed 2 of its 4 steps: where
    most groundings agree with their prior the prior's strength m fits to its ceiling, and at 50 this one was
    priced 0.07-0.10 in 9 seeds of 10 (so the planner chose it again and again: the costed world's worst seed);
    with the ceiling at 10 (`learning.shrinkage.MAX_STRENGTH`) 0.15-0.21."""
    rng = random.Random(seed)
    places = [f"p{i}" for i in range(10)]
    fine = [GroundAction("drive", (f"v{rng.randrange(3)}", a, b)) for a in places for b in places if a != b][:60]
    steps = [rec(i, g, rng.random() < 0.02, weather="sun") for i, g in enumerate(rng.choice(fine) for _ in range(800))]
    bad = GroundAction("drive", ("v9", "q1", "q2"))
    for i, failed in enumerate((True, False, True, False)):
        steps.insert(rng.randrange(len(steps)), rec(10_000 + i, bad, failed, weather="sun"))
    model = FailureModel(stale_half_life=None).fit(steps)  # the prior's strength alone, not its 800 runs' aging
    assert model.predict_proba([bad], {"weather": "sun"})[0] > 0.13


def test_one_groundings_failures_stay_mostly_its_own_until_another_repeats_them() -> None:
    """Without a token model (few steps, one outcome): one grounding failed 8 of 8. Its untried sibling (another
    engine for the same job and topic) starts near the prior for nothing, far below it; before, the steps were
    pooled into the action's rate and the sibling started at 0.47 beside the failing one's 0.51. Each further
    grounding that fails alike raises the rate an untried one starts from (replicated failures generalise)."""

    def search(job: str, engine: str) -> GroundAction:
        return GroundAction("web-search", (job, "competitors", engine))

    history = [rec(i, search("job1", "web-basic"), True, hour=9 + i) for i in range(8)]
    model = FailureModel().fit(history)
    tried, sibling = model.predict_proba([search("job1", "web-basic"), search("job1", "web-pro")])
    assert tried > 0.5 and sibling < 0.2 and sibling > model.prior_mean
    starts = [sibling]
    for job in ("job2", "job3"):
        history += [rec(len(history), search(job, "web-basic"), True) for _ in range(8)]
        starts.append(FailureModel().fit(history).predict_proba([search("job9", "web-pro")])[0])
    assert starts[0] < starts[1] < starts[2] < 0.5, starts


@pytest.mark.parametrize("seed", range(10))
def test_with_a_token_model_a_lone_groundings_failures_reach_its_siblings_only_in_part(seed: int) -> None:
    """300 drives at 2% and one drive to a place nothing else visits, failed 10 of 10: its tokens always occur
    together, so the L2 prior splits their weight and a sibling (another truck, the other direction, another
    origin) gets only the share it has in common, beside the failing one's 0.99. The way back shares the most
    (the truck on that road, `s:`, and the road, `u:`): 0.12-0.43 over these seeds; another truck or another
    origin 0.07-0.23. With the destination's token fitted at full value, it took most of the blame, so another
    origin got up to 0.51 and the way back as little as 0.03 (a guard of `learning.model`'s docstring)."""
    rng = random.Random(seed)
    history = [
        rec(
            i,
            GroundAction("drive", (f"t{rng.randrange(3)}", f"s{rng.randrange(6)}", f"s{rng.randrange(6)}")),
            rng.random() < 0.02,
        )
        for i in range(300)
    ]
    history += [rec(1000 + i, GroundAction("drive", ("t0", "s0", "s9")), True) for i in range(10)]
    p = (
        FailureModel()
        .fit(history)
        .predict_proba(
            [
                GroundAction("drive", args)
                for args in (("t0", "s0", "s9"), ("t1", "s0", "s9"), ("t0", "s9", "s0"), ("t0", "s1", "s9"))
            ]
        )
    )
    assert p[0] > 0.85 and p[2] < 0.5 and max(p[1], p[3]) < 0.3, p


def test_a_sparse_actions_cells_are_not_priced_by_one_or_two_lucky_steps() -> None:
    """17 steps of a query that fails about half the time, spread over 15 (grounding, situation) cells (the tools
    worlds' query-database at episode 160): 13 cells with one step, 2 with two successes. Single steps cannot say
    how much cells differ, so the prior's strength m keeps its default (`learning.shrinkage.identifies_strength`);
    fit to them it went to its floor (1) and the two lucky cells were priced 0.14, the unlucky ones 0.65, so the
    planner queried exactly where it had been lucky."""
    situations = [
        {"hour": h, "region": r, "weather": w} for h in ("peak", "off") for r in ("eu", "us") for w in ("sun", "rain")
    ]
    steps, i = [], 0
    for c in range(13):
        query = GroundAction("query", (f"job{c % 4}", ("pricing", "news", "rules")[c % 3], "db"))
        steps.append(rec(i, query, c % 13 < 8, **situations[c % 8]))
        i += 1
    lucky = [GroundAction("query", (f"job{c}", "news", "db")) for c in (4, 5)]
    for query in lucky:
        for _ in range(2):
            steps.append(rec(i, query, False, **situations[0]))
            i += 1
    model = FailureModel().fit(steps)
    priced_lucky = model.predict_proba(lucky, situations[0])
    unlucky = model.predict_proba([GroundAction("query", ("job0", "pricing", "db"))], situations[0])
    assert min(priced_lucky) > 0.2 and unlucky[0] - min(priced_lucky) < 0.3


@pytest.mark.parametrize("seed", range(10))
def test_a_truck_that_fails_on_a_road_one_way_is_suspect_on_the_way_back_more_than_another_truck(seed: int) -> None:
    """The vehicle-roads shape: truck t0 fails 70% on the road p1-p4 (driven one way only, p1 -> p4), every other
    drive 2%; another truck, t2, never drove that road. Which truck fails is the truck's, on that road either way:
    the way back (t0 p4 -> p1, never driven) must be more suspect than t2 on the road. With `u:` tokens for pairs
    of arguments only, nothing spans the truck and the road together, so the way back started below t2's
    (0.010-0.047 against 0.021-0.031: t2 took the road's blame) in 8 seeds of 10."""
    rng = random.Random(seed)
    places = [f"p{i}" for i in range(8)]
    roads = [(places[i], places[(i + 1) % 8]) for i in range(8)] + [("p1", "p4"), ("p2", "p6")]
    steps = []
    for _ in range(600):
        truck, (a, b) = rng.choice(["t0", "t1", "t2"]), rng.choice(roads)
        if rng.random() < 0.5:
            a, b = b, a
        if {a, b} == {"p1", "p4"} and (truck == "t2" or (truck, a) == ("t0", "p4")):
            continue  # t2 never on the road, t0 on it one way only
        p = 0.7 if truck == "t0" and {a, b} == {"p1", "p4"} else 0.02
        action = GroundAction("drive", (truck, a, b))
        steps.append(rec(len(steps), action, rng.random() < p, weather=rng.choice(["sun", "rain"])))
    model = FailureModel().fit(steps)
    back, other = model.predict_proba(
        [GroundAction("drive", ("t0", "p4", "p1")), GroundAction("drive", ("t2", "p1", "p4"))], {"weather": "sun"}
    )
    assert back > other


@pytest.mark.parametrize("seed", range(10))
def test_a_trucks_new_bad_road_is_condemned_by_its_first_failure_as_often_as_bad_roads_are_common(seed: int) -> None:
    """`vehicle-roads`' shape: three trucks on a ring of 8 places with two chords, each truck failing 70% on two
    roads of its own (both ways), every other drive 2%; 600 drives, then truck t0's last bad road, never driven
    before, driven once and failing. A fifth of the truck-road pairs are bad, so by Bayes that one failure makes
    the road 9 to 1 bad and prices it at about 0.63. The outlier share was fitted over cells (each drive in each
    weather, a bad road's two ways explaining each other through their `s:` token): it came out at 0.001-0.04,
    and the road started at 0.14-0.37 (10 of 10 seeds under 0.45), so the planner drove it again and again. Over
    kin groups (`learning.shrinkage.fit_kin_mixture`) the share is 0.19-0.21 and the road 0.55-0.68; the fine
    drives average 0.017-0.044 (0.010-0.037 before)."""
    rng = random.Random(seed)
    places = [f"p{i}" for i in range(8)]
    roads = [(places[i], places[(i + 1) % 8]) for i in range(8)] + [("p1", "p4"), ("p2", "p6")]
    trucks = ["t0", "t1", "t2"]
    bad = {t: sorted(rng.sample(roads, 2)) for t in trucks}
    new = ("t0", *bad["t0"][0])
    steps = []
    for _ in range(600):
        truck, (a, b) = rng.choice(trucks), rng.choice(roads)
        if rng.random() < 0.5:
            a, b = b, a
        if truck == "t0" and {a, b} == set(new[1:]):
            continue
        p = 0.7 if any({a, b} == set(road) for road in bad[truck]) else 0.02
        action = GroundAction("drive", (truck, a, b))
        steps.append(rec(len(steps), action, rng.random() < p, weather=rng.choice(["sun", "rain"])))
    steps.append(rec(len(steps), GroundAction("drive", new), True, weather="sun"))
    model = FailureModel().fit(steps)
    fine = [GroundAction("drive", (t, *road)) for t in trucks for road in roads if road not in bad[t]]
    assert model.predict_proba([GroundAction("drive", new)], {"weather": "sun"})[0] >= 0.45
    assert model.predict_proba(fine, {"weather": "sun"}).mean() < 0.05


def test_a_tool_that_fails_everywhere_is_priced_by_its_tool_not_by_noise_in_the_situations() -> None:
    """The tools world's database shape at the stage where the learned arm lost to the oracle: db-news times out
    30% of the time whatever the job, topic or situation, db-internal fails 1%; 70 and 65 queries spread over
    four jobs, three topics and eight situations (hour x region x weather). Every grounding in every situation
    must be priced near its truth, and a new job's query near the rate db-news showed. Before a family's scale
    was fitted by MacKay's fixed point (`learning.families`), noise families (a job at peak hours, a topic in
    the rain) kept weights of +-0.4 and db-news' own token 0.2: the cells' mean absolute error was 0.065 over
    these ten traces and a new job's price 0.069 off the rate db-news showed, on average; after, 0.048 and 0.041.
    With an object's own token fitted at half value (`learning.features.OBJECT_VALUE`, so that a road's failures
    go to the road before the place it leads to), part of db-news' blame goes to its pairs with jobs and topics:
    0.060 and 0.065. The closed loop's tools worlds did not lose by it (docs/decisions/prior-tokens.md)."""
    errors, offsets = [], []
    jobs, topics = [f"job{i}" for i in range(1, 5)], ["pricing", "competitors", "regulation"]
    situations = [
        {"hour": h, "region": r, "weather": w}
        for h in ("peak", "off-peak")
        for r in ("eu", "us")
        for w in ("sun", "rain")
    ]
    for seed in range(10):
        rng = random.Random(seed)
        steps, failed = [], 0
        for db, p, count in (("db-news", 0.3, 70), ("db-internal", 0.01, 65)):
            for _ in range(count):
                action = GroundAction("query-database", (rng.choice(jobs), rng.choice(topics), db))
                fail = rng.random() < p
                failed += fail and db == "db-news"
                steps.append(rec(len(steps), action, fail, **rng.choice(situations)))
        rng.shuffle(steps)
        model = FailureModel().fit(steps)
        for db, truth in (("db-news", 0.3), ("db-internal", 0.01)):
            groundings = [GroundAction("query-database", (j, t, db)) for j in [*jobs, "job9"] for t in topics]
            for situation in situations:
                errors += [abs(p - truth) for p in model.predict_proba(groundings, situation)]
        new = model.predict_proba([GroundAction("query-database", ("job9", "pricing", "db-news"))], situations[0])
        offsets.append(abs(new[0] - failed / 70))
    assert sum(errors) / len(errors) < 0.065
    assert sum(offsets) / len(offsets) < 0.07


@pytest.mark.parametrize("seed", range(6))
def test_a_road_broken_for_every_van_does_not_condemn_other_roads_into_its_place(seed: int) -> None:
    """The `degradation` shape with three vans: the route p0-p2-p3-p1, whose last road p3 -> p1 turns bad (70%)
    for every van after 40 episodes; the detour p0-p4-p5-p1 driven twice, its last road failing once (by chance:
    every other drive fails 2%). The broken road's failures were put down to the place it leads to (`a2:p1`,
    one token for all three vans) rather than to the road, and so was the detour's one failure: its last road
    was priced 0.63-0.68 over these seeds, as bad as the broken one, and the plans kept the broken road. With
    the place's token fitted at half value (`learning.features.OBJECT_VALUE`), the road takes the blame first,
    and the detour's last road is priced 0.22-0.31 (one failure in two drives)."""
    rng = random.Random(seed)
    steps = []

    def drive(route: list[str], van: str, weather: str, p_bad: float, fail_at: int | None = None) -> None:
        for i, (a, b) in enumerate(zip(route, route[1:])):
            if fail_at is None:
                failed = rng.random() < (p_bad if (a, b) == ("p3", "p1") else 0.02)
            else:
                failed = i == fail_at
            steps.append(rec(len(steps), GroundAction("drive", (van, a, b)), failed, weather=weather))
            if failed:
                return

    for episode in range(120):
        drive(["p0", "p2", "p3", "p1"], f"v{episode % 3}", rng.choice(["sun", "rain"]), 0.02 if episode < 40 else 0.7)
        if episode == 60:
            drive(["p0", "p4", "p5", "p1"], "v0", "sun", 0.0, fail_at=-1)
        if episode == 80:
            drive(["p0", "p4", "p5", "p1"], "v1", "rain", 0.0, fail_at=2)
    model = FailureModel().fit(steps)
    broken, detour = model.predict_proba(
        [GroundAction("drive", ("v2", "p3", "p1")), GroundAction("drive", ("v2", "p5", "p1"))], {"weather": "sun"}
    )
    assert broken > 0.5
    assert detour < 0.4, (broken, detour)
