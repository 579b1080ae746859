"""Failure models and learned costs: risky groundings cost more, evidence recovers, the prior protects."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from domains.model import ActionSchema, Domain, GroundAction, Parameter, Problem, Task
from learning import FailureModel, NoTrainingDataError, action_costs, load_latest, plan_success_probability, retrain
from learning.costs import plan_price
from traces import StepRecord, TraceStore

AB = GroundAction("drive", ("t1", "a", "b"))
AC = GroundAction("drive", ("t1", "a", "c"))
PARAMS = [Parameter("?t", "truck"), Parameter("?from", "place"), Parameter("?to", "place")]
TASK = Task(
    Domain("roads", actions=(ActionSchema("drive", tuple(PARAMS)),)),
    Problem("p", "roads", objects=(("t1", "truck"), ("a", "place"), ("b", "place"), ("c", "place"))),
)


def rec(i: int, action: GroundAction, failed: bool, **features) -> StepRecord:
    return StepRecord(
        run_id=f"r{i // 10}", step=i % 10, action=action.name, args=action.args,
        outcome="failure" if failed else "success", features=features,
    )  # fmt: skip


def risky_history(rng: random.Random, n: int = 300) -> list[StepRecord]:
    """(drive t1 a b) fails 80% of the time, (drive t1 a c) 5%."""
    out = []
    for i in range(n):
        out.append(rec(2 * i, AB, rng.random() < 0.8))
        out.append(rec(2 * i + 1, AC, rng.random() < 0.05))
    return out


def test_risky_grounding_gets_higher_p_fail_and_cost() -> None:
    model = FailureModel(half_life_steps=200).fit(risky_history(random.Random(0)))
    p_ab, p_ac = model.predict_proba([AB, AC])
    assert p_ab > 0.6 and p_ac < 0.15
    costs = action_costs(model, TASK, [AB, AC])
    assert costs[str(AB)].cost > costs[str(AC)].cost + 0.8
    assert costs[str(AB)].base_cost == costs[str(AC)].base_cost == 1.0
    # priced above its mean by the uncertainty of its own record (`learning.explore`)
    assert costs[str(AB)].cost > 1.0 - math.log(1.0 - costs[str(AB)].p_fail)


def test_repaired_action_recovers_after_successes() -> None:
    history = risky_history(random.Random(1))
    before = FailureModel(half_life_steps=200).fit(history).predict_proba([AB])[0]
    repaired = history + [rec(1000 + i, AB, False) for i in range(300)]
    after = FailureModel(half_life_steps=200).fit(repaired).predict_proba([AB])[0]
    by_change = FailureModel(half_life_steps=None).fit(repaired).predict_proba([AB])[0]
    without_aging = FailureModel(half_life_steps=None, change_odds=None).fit(repaired).predict_proba([AB])[0]
    assert before > 0.6
    assert after < 0.2
    # the change point alone (`learning.changes`): only the 300 steps since the repair count
    assert by_change < 0.02
    assert without_aging > 0.3  # nothing aged: the all-time rate, what the planner kept avoiding


def test_a_lone_tools_failures_follow_the_evidence_and_many_groundings_failures_do_not_condemn_a_new_one() -> None:
    """A tool with one grounding: its own record says whether it is broken (the prior outlier share of
    `learning.shrinkage`), so 3 failures in 3 calls make it more likely broken than not."""
    only_two = FailureModel().fit([rec(0, AB, True), rec(1, AB, True)])
    three = FailureModel().fit([rec(i, AB, True) for i in range(3)])
    assert 0.5 < only_two.predict_proba([AB])[0] < three.predict_proba([AB])[0]
    rng = random.Random(2)
    history = [rec(i, GroundAction("drive", (f"t{i % 20}", "a", f"b{i % 7}")), rng.random() < 0.03)
               for i in range(3000)]  # fmt: skip
    odd = GroundAction("drive", ("t9", "q", "z"))
    two = FailureModel().fit(history + [rec(5000, odd, True), rec(5001, odd, True)])
    ten = FailureModel().fit(history + [rec(5000 + i, odd, True) for i in range(10)])
    # Not condemned: two failures among 140 groundings that all fail ~3% of the time leave a new grounding well
    # short of an even chance (m is fit large on such a homogeneous action; the outlier mixture of
    # `learning.shrinkage` gives it a chance of being broken that hangs on the outlier share it fits, one
    # grounding in 270-370: 0.26 with one prior scale for every token, 0.34 with the scales fitted by
    # `learning.families`); ten in a row are evidence enough.
    assert two.predict_proba([odd])[0] < 0.4
    assert ten.predict_proba([odd])[0] > 0.5


def test_unknown_actions_get_the_rate_of_the_recorded_action_names() -> None:
    """An action name never recorded starts at the population rate of those recorded: below the optimistic prior
    where every recorded step succeeded, above it where the recorded names fail often."""
    fly = GroundAction("fly", ("p1",))
    risky = FailureModel(prior_mean=0.05, prior_strength=20).fit(risky_history(random.Random(3), 50))
    fine = FailureModel(prior_mean=0.05, prior_strength=20).fit(
        [rec(i, GroundAction(f"act{i % 5}", ()), False) for i in range(50)]
    )
    assert fine.predict_proba([fly])[0] < 0.03
    assert risky.predict_proba([fly])[0] > 0.05
    old = FailureModel(prior_mean=0.05).fit(risky_history(random.Random(3), 50))
    old.unseen_rate_ = None  # a model stored before the rate was learned: the optimistic prior
    assert old.predict_proba([fly])[0] == pytest.approx(0.05)


def test_step_features_are_used() -> None:
    rng = random.Random(4)
    history = [rec(i, AB, rng.random() < (0.7 if i % 2 else 0.02), weather="rain" if i % 2 else "sun")
               for i in range(2000)]  # fmt: skip
    model = FailureModel().fit(history)
    assert model.predict_proba([AB], {"weather": "rain"})[0] > 0.5
    assert model.predict_proba([AB], {"weather": "sun"})[0] < 0.1


def test_plan_success_probability_is_product_and_the_price_sums_costs() -> None:
    model = FailureModel(half_life_steps=200).fit(risky_history(random.Random(5)))
    costs = action_costs(model, TASK, [AB, AC])
    expected = (1 - costs[str(AB)].p_fail) * (1 - costs[str(AC)].p_fail)
    assert plan_success_probability(costs, [AB, "(DRIVE t1 a c)"]) == pytest.approx(expected)
    with pytest.raises(KeyError, match="drive t2"):
        plan_success_probability(costs, [GroundAction("drive", ("t2", "a", "b"))])
    price = plan_price(costs, [AB, "(DRIVE t1 a c)"])
    assert price is not None and price.success_probability == plan_success_probability(costs, [AB, AC])
    assert price.cost == round(costs[str(AB)].cost + costs[str(AC)].cost, 6)
    assert plan_price(costs, [AB, GroundAction("drive", ("t2", "a", "b"))]) is None  # a step priced by nobody


def test_no_model_means_base_costs() -> None:
    costs = action_costs(None, TASK, [AB])
    assert costs[str(AB)].p_fail == 0.0 and costs[str(AB)].cost == 1.0


def test_retrain_stores_versioned_model_with_metrics(store_target: str) -> None:
    with TraceStore(store_target) as store:
        assert load_latest(store) is None
        with pytest.raises(NoTrainingDataError, match="no steps"):
            retrain(store)
        store.record_steps(risky_history(random.Random(6), 500))
        info = retrain(store, half_life_steps=300)
        assert info.version == 1 and info.n_steps == 1000
        assert info.actions["drive"]["steps"] == 1000
        assert info.hyperparameters["half_life_steps"] == 300
        assert {"log_loss", "brier", "auc"} <= set(info.metrics) and info.metrics["auc"] > 0.8
        assert retrain(store).version == 2
        model = load_latest(store)
        assert store.latest_model().metadata["n_steps"] == 1000
    p_ab, p_ac = model.predict_proba([AB, AC])
    assert p_ab > 0.6 > 0.15 > p_ac


def test_streamed_and_in_memory_fits_agree(store_target: str) -> None:
    history = risky_history(random.Random(7), 200)
    with TraceStore(store_target) as store:
        store.record_steps(history)
        retrain(store, holdout_fraction=0.0)
        streamed = load_latest(store)
    direct = FailureModel().fit(history)
    assert np.allclose(streamed.predict_proba([AB, AC]), direct.predict_proba([AB, AC]), atol=1e-6)
