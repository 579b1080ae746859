"""The failure estimate is consistent, generalises through pairs and types, explores, and is stored as data.

Consistency is a property over random traces (hypothesis): whatever the other groundings and the prior say,
a grounding with >= 30 recorded steps gets p_fail within 0.05 of its own observed failure rate.
"""

from __future__ import annotations

import json
import math
import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import rec

from domains.model import GroundAction
from learning import FailureModel, ModelFormatError, load_latest, model_from_bytes, model_to_bytes, retrain
from learning.explore import PESSIMISM, explore_p_fail
from traces import StepRecord, TraceStore


@st.composite
def traces(draw):
    """A few groundings of one or two action names with arbitrary true rates and step counts, interleaved."""
    rng = random.Random(draw(st.integers(0, 10**6)))
    n_groundings = draw(st.integers(1, 8))
    groundings = [
        GroundAction(
            draw(st.sampled_from(["drive", "fly"])),
            (f"v{draw(st.integers(0, 2))}", f"p{draw(st.integers(0, 4))}", f"p{draw(st.integers(0, 4))}"),
        )
        for _ in range(n_groundings)
    ]
    rates = [draw(st.sampled_from([0.0, 0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0])) for _ in groundings]
    counts = [draw(st.integers(0, 80)) for _ in groundings]
    steps = [(g, rate) for g, rate, count in zip(groundings, rates, counts) for _ in range(count)]
    rng.shuffle(steps)
    return [rec(i, g, rng.random() < rate) for i, (g, rate) in enumerate(steps)]


def observed(history: list[StepRecord]) -> dict[GroundAction, tuple[int, int]]:
    out: dict[GroundAction, tuple[int, int]] = {}
    for r in history:
        g = GroundAction(r.action, r.args)
        n, f = out.get(g, (0, 0))
        out[g] = (n + 1, f + r.failed)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_p_fail_converges_to_the_observed_rate(history) -> None:
    # nothing aged (no change points, no staleness): the shrinkage's consistency on the plain counts
    model = FailureModel(half_life_steps=None, change_odds=None, stale_half_life=None).fit(history)
    seen = observed(history)
    groundings = [g for g, (n, _) in seen.items() if n >= 30]
    p = model.predict_proba(groundings)
    for g, p_fail in zip(groundings, p):
        n, f = seen[g]
        assert abs(p_fail - f / n) <= 0.05 + 1e-9, (g, n, f, p_fail)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_with_every_kind_of_aging_p_fail_converges_to_the_rate_of_the_current_evidence(history) -> None:
    """Defaults (change points, staleness, step decay): a grounding whose current evidence (the steps since its
    last change, aged) weighs at least `trust_steps` is priced within `tolerance` of that evidence's rate."""
    model = FailureModel().fit(history)
    for name, action in model.actions_.items():
        for cell, (n_w, f_w, *_rest) in action.cells.items():
            if n_w < model.trust_steps:
                continue
            args, _, situation = cell.partition("|")
            assert situation == ""
            p_fail = model.predict_proba([GroundAction(name, tuple(args.split()))])[0]
            assert abs(p_fail - f_w / n_w) <= model.tolerance + 1e-9, (name, cell, n_w, f_w, p_fail)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_with_recency_weights_p_fail_converges_to_the_weighted_rate(history) -> None:
    half_life = 200.0
    model = FailureModel(half_life_steps=half_life, change_odds=None, stale_half_life=None).fit(history)
    weights: dict[GroundAction, list[float]] = {}
    per_action: dict[str, list[StepRecord]] = {}
    for r in history:
        per_action.setdefault(r.action, []).append(r)
    for steps in per_action.values():
        for age, r in enumerate(reversed(steps)):
            acc = weights.setdefault(GroundAction(r.action, r.args), [0.0, 0.0])
            acc[0] += 0.5 ** (age / half_life)
            acc[1] += r.failed * 0.5 ** (age / half_life)
    groundings = [g for g, (n, _) in weights.items() if n >= 30]
    for g, p_fail in zip(groundings, model.predict_proba(groundings)):
        n, f = weights[g]
        assert abs(p_fail - f / n) <= 0.05 + 1e-9


def test_the_issue_example_lands_on_the_traces_rates() -> None:
    """40 steps of every grounded move, a 60% and a 70% one among 3% ones (the issue's transport world): the
    old estimator said 0.42, 0.37 and up to 0.19."""
    rng = random.Random(0)
    places = [f"s{i}" for i in range(6)]
    rates = {(a, b): 0.03 for a in places for b in places if a != b}
    rates[("s0", "s1")], rates[("s2", "s3")] = 0.6, 0.7
    history = [
        rec(i * 100 + j, GroundAction("move", ("truck", a, b)), rng.random() < rate)
        for i, ((a, b), rate) in enumerate(rates.items())
        for j in range(40)
    ]
    rng.shuffle(history)
    model = FailureModel().fit(history)
    seen = observed(history)
    worst = max(abs(p - seen[g][1] / seen[g][0]) for g, p in zip(seen, model.predict_proba(list(seen))))
    assert worst <= 0.05


def test_a_bad_pair_generalises_to_other_vehicles_and_both_directions() -> None:
    """The road s0-s1 is bad for every truck: trucks that drove it teach the model about one that never did."""
    rng = random.Random(1)
    history = []
    for i in range(3000):
        truck, a, b = f"t{rng.randrange(4)}", f"s{rng.randrange(6)}", f"s{rng.randrange(6)}"
        bad = {a, b} == {"s0", "s1"}
        history.append(rec(i, GroundAction("drive", (truck, a, b)), rng.random() < (0.7 if bad else 0.03)))
    model = FailureModel().fit(history)
    new_truck_bad, new_truck_fine = model.predict_proba(
        [GroundAction("drive", ("t9", "s1", "s0")), GroundAction("drive", ("t9", "s2", "s3"))]
    )
    assert new_truck_bad > 0.35 and new_truck_fine < 0.1


def test_a_new_object_of_a_bad_type_starts_pessimistic() -> None:
    """100 steps of each sibling of a bad subtype (true rate 0.6): a new one starts within 0.15 of that rate,
    through the task's types alone (the trace store keeps no types)."""
    rng = random.Random(2)
    old = [f"old{i}" for i in range(3)]
    new = [f"new{i}" for i in range(3)]
    history = [
        rec(i, GroundAction("haul", (truck, f"c{rng.randrange(5)}")), rng.random() < (0.6 if truck in old else 0.03))
        for i, truck in enumerate(rng.choice(old + new) for _ in range(600))
    ]
    types = {t: "old-truck" for t in old + ["old9"]} | {t: "new-truck" for t in new + ["new9"]}
    types |= {f"c{i}": "crate" for i in range(5)}
    model = FailureModel().fit(history)
    p_old, p_new = model.predict_proba(
        [GroundAction("haul", ("old9", "c1")), GroundAction("haul", ("new9", "c1"))], object_types=types
    )
    assert abs(p_old - 0.6) <= 0.15 and p_new < 0.15
    without_types = model.predict_proba([GroundAction("haul", ("old9", "c1"))])[0]
    assert without_types < p_old - 0.2  # the types are what made it pessimistic


@pytest.mark.parametrize("seed", range(30))
def test_a_new_object_starts_at_its_types_rate_whatever_else_was_seen(seed: int) -> None:
    """100 steps of 2-4 siblings of a bad type (true rate 0.3-0.8), among 100-600 steps of a good type: a new
    object of the bad type starts within 0.15 of its siblings' observed rate. It started up to 0.26 above it
    when the good type's many steps were capped: the action's base rate it was anchored to was inflated."""
    rng = random.Random(seed)
    rate = rng.uniform(0.3, 0.8)
    old = [f"old{i}" for i in range(rng.choice([2, 3, 4]))]
    new = [f"new{i}" for i in range(3)]
    steps = [(rng.choice(old), rng.random() < rate) for _ in range(100)]
    steps += [(rng.choice(new), rng.random() < 0.03) for _ in range(rng.choice([100, 300, 600]))]
    rng.shuffle(steps)
    history = [
        rec(i, GroundAction("haul", (truck, f"c{rng.randrange(5)}")), failed) for i, (truck, failed) in enumerate(steps)
    ]
    types = (
        {t: "old-truck" for t in old + ["old9"]} | {t: "new-truck" for t in new} | {f"c{i}": "crate" for i in range(5)}
    )
    observed = sum(failed for truck, failed in steps if truck in old) / 100
    p = FailureModel().fit(history).predict_proba([GroundAction("haul", ("old9", "c1"))], object_types=types)[0]
    assert abs(p - observed) <= 0.15, (p, observed, rate)


def test_a_grounding_carries_its_record_into_a_situation_it_was_never_seen_in() -> None:
    """A drive that failed 6 of 8 times in the sun, among drives that fail 2%: in the rain (never tried there)
    it starts pessimistic. Before, a situation's cell had only the prior, which never saw the grounding, and
    started it at the 2% of drives in general (the costed world's worst seed chose it again and again)."""
    rng = random.Random(5)
    history = []
    for i in range(600):
        truck, a, b = f"t{rng.randrange(3)}", f"s{rng.randrange(5)}", f"s{rng.randrange(5)}"
        history.append(
            rec(i, GroundAction("drive", (truck, a, b)), rng.random() < 0.02, weather=rng.choice(["sun", "rain"]))
        )
    bad = GroundAction("drive", ("t0", "s0", "s9"))
    history += [rec(600 + i, bad, i < 6, weather="sun") for i in range(8)]
    model = FailureModel().fit(history)
    in_sun, in_rain = (
        model.predict_proba([bad], {"weather": "sun"})[0],
        model.predict_proba([bad], {"weather": "rain"})[0],
    )
    assert in_sun > 0.5 and in_rain > 0.3, (in_sun, in_rain)
    ordinary = GroundAction("drive", ("t1", "s1", "s2"))
    assert model.predict_proba([ordinary], {"weather": "rain"})[0] < 0.1


def test_situation_splits_one_objects_counts() -> None:
    rng = random.Random(3)
    engine = GroundAction("search", ("engine-a",))
    history = [
        rec(i, engine, rng.random() < (0.8 if i % 2 else 0.02), hour="peak" if i % 2 else "off") for i in range(400)
    ]
    model = FailureModel().fit(history)
    assert model.predict_proba([engine], {"hour": "peak"})[0] > 0.7
    assert model.predict_proba([engine], {"hour": "off"})[0] < 0.08


def test_thompson_tries_an_untried_alternative_within_a_bounded_number_of_calls() -> None:
    """A known route that fails 10% against an untried one whose siblings failed 40%: the mean never prices the
    untried one below the known, Thompson draws do within 50 planning calls (and not every time)."""
    rng = random.Random(4)
    known = GroundAction("go", ("a", "b"))
    history = [rec(i, known, rng.random() < 0.1) for i in range(200)]
    history += [rec(200 + i, GroundAction("go", (f"x{i % 5}", "y")), rng.random() < 0.4) for i in range(100)]
    model = FailureModel(stale_half_life=None).fit(history)  # the known route's last 100 runs unseen: not stale
    untried = GroundAction("go", ("c", "d"))
    mean, concentration = model.predict_posterior([known, untried])
    assert mean[1] > mean[0]  # greedy would never try it
    draws = np.random.default_rng(0)
    tried = [explore_p_fail(mean, concentration, "thompson", draws) for _ in range(50)]
    cheaper = sum(p[1] < p[0] for p in tried)
    assert 1 <= cheaper < 50
    optimistic = explore_p_fail(mean, concentration, "optimistic")
    assert optimistic[1] < mean[1] and abs(optimistic[0] - mean[0]) < abs(optimistic[1] - mean[1])
    assert np.array_equal(explore_p_fail(mean, concentration, "cautious", pessimism=0.0), np.clip(mean, 1e-6, 1 - 1e-6))
    with pytest.raises(ValueError, match="expected one of: cautious, thompson, optimistic"):
        explore_p_fail(mean, concentration, "greedy")  # type: ignore[arg-type]


def test_cautious_charges_each_grounding_for_its_uncertainty() -> None:
    """Three groundings believed to fail 20% of the time, from 500, 50 and 12 steps' worth of evidence: under
    `cautious` the less a grounding is known, the dearer it is priced (the optimizer's curse: among plans of equal
    estimated cost the search picks the most underestimated), by one posterior standard deviation, which fades
    as evidence grows. A grounding with no record of its own keeps its prior: optimism for the untried. What a
    cost reports as p_fail stays the posterior mean."""
    from learning.costs import Posteriors, priced

    mean, concentration = np.array([0.2, 0.2, 0.2]), np.array([500.0, 50.0, 12.0])
    p = explore_p_fail(mean, concentration, "cautious")
    assert p[0] < p[1] < p[2]
    assert p[0] - 0.2 == pytest.approx(PESSIMISM * math.sqrt(0.2 * 0.8 / 501))
    assert p[2] - 0.2 == pytest.approx(PESSIMISM * math.sqrt(0.2 * 0.8 / 13))
    costs = priced(Posteriors(("(a)", "(b)", "(c)"), np.ones(3), mean, concentration), lam=5.0)
    assert costs["(a)"].cost < costs["(b)"].cost < costs["(c)"].cost
    assert {c.p_fail for c in costs.values()} == {0.2}
    untried = explore_p_fail(mean, concentration, "cautious", tried=np.array([True, True, False]))
    assert untried[2] == pytest.approx(0.2) and untried[1] == p[1]


def test_models_are_stored_as_json_and_pickles_are_refused(tmp_path) -> None:
    rng = random.Random(5)
    history = [
        rec(i, GroundAction("drive", ("t1", "a", f"b{i % 3}")), rng.random() < 0.2 * (i % 3)) for i in range(300)
    ]
    model = FailureModel(half_life_steps=100).fit(history, holdout_fraction=0.2)
    blob = model_to_bytes(model)
    data = json.loads(blob)
    assert data["format_version"] == 2 and data["params"]["half_life_steps"] == 100
    again = model_from_bytes(blob)
    actions = [GroundAction("drive", ("t1", "a", f"b{i}")) for i in range(4)]
    assert np.allclose(again.predict_proba(actions, {"w": "x"}), model.predict_proba(actions, {"w": "x"}))
    with TraceStore(tmp_path / "t.db") as store:
        store.record_steps(history)
        retrain(store)
        assert json.loads(store.latest_model().blob)["format_version"] == 2
        store.save_model(pickle.dumps(model), {"format": "portfolio-planner/failure-model/1"}, {})
        with pytest.raises(ModelFormatError, match="pickle.*portfolio retrain"):
            load_latest(store)
    for bad, message in (
        (b"{not json", "not a JSON"),
        (b'{"format": "x"}', "not a portfolio"),
        (blob.replace(b'"format_version":2', b'"format_version":9'), "format version 9"),
    ):
        with pytest.raises(ModelFormatError, match=message):
            model_from_bytes(bad)
