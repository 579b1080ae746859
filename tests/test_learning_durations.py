"""Durations and failure kinds learned per grounding (`learning.durations`): consistent with 30+ steps, shrunk
with few, stored with the failure model, and fed by the trace store's side_effects column."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domains.model import GroundAction
from learning import FailureModel, load_latest, retrain
from learning.durations import TimeModel
from traces import StepRecord, TraceStore


def rows(groundings: dict[str, tuple[float, int]], rng: np.random.Generator, cv: float = 0.1) -> list[tuple]:
    """Steps of `call <tool>`, each tool (true mean ms, steps) timed with a gamma noise of coefficient `cv`,
    interleaved as an agent would run them."""
    order = [tool for tool, (_, n) in groundings.items() for _ in range(n)]
    rng.shuffle(order)
    shape = 1.0 / cv**2
    noise = rng.gamma(shape, 1 / shape, size=len(order))
    return [
        ("call", json.dumps([tool]), "{}", "success", None, float(groundings[tool][0] * x), None)
        for tool, x in zip(order, noise)
    ]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    means=st.lists(st.floats(10.0, 20_000.0), min_size=1, max_size=6),
    steps=st.lists(st.integers(0, 60), min_size=6, max_size=6),
    own=st.integers(30, 80),
    seed=st.integers(0, 2**32 - 1),
)
def test_learned_duration_is_within_10_percent_of_the_truth_with_30_steps(means, steps, own, seed):
    """Whatever the other groundings take (up to 2,000x apart, any number of steps), a grounding with 30+ timed
    steps (durations with a 10% coefficient of variation) is priced within 10% of its true mean."""
    groundings = {f"t{i}": (m, steps[i]) for i, m in enumerate(means)}
    groundings["t0"] = (means[0], own)
    model = TimeModel().fit_rows([rows(groundings, np.random.default_rng(seed))])
    [expected] = model.predict([GroundAction("call", ("t0",))]).success_ms
    assert abs(expected - means[0]) <= 0.1 * means[0]


def test_few_steps_are_shrunk_towards_what_the_others_take():
    """Three steps of a new tool say little: its estimate lies between its own mean and its siblings'."""
    rng = np.random.default_rng(0)
    data = rows({"a": (100.0, 50), "b": (110.0, 50), "c": (90.0, 50), "new": (400.0, 3)}, rng)
    model = TimeModel().fit_rows([data])
    own = np.mean([r[5] for r in data if r[1] == '["new"]'])
    [new, unseen] = model.predict([GroundAction("call", ("new",)), GroundAction("call", ("never",))]).success_ms
    assert 100.0 < new < own - 20
    assert 90.0 < unseen < 160.0  # a grounding never tried takes what the tried ones take (new weighs 3 steps)


def step(i: int, tool: str, outcome: str, ms: float, category: str | None = None, side: bool | None = None):
    return StepRecord(
        run_id=f"r{i}", step=0, action="call", args=(tool,), outcome=outcome, duration_ms=ms,
        failure_category=category, side_effects=side,
    )  # fmt: skip


def history() -> list[StepRecord]:
    """`fast` fails 40% transiently in 20 ms and succeeds in 100 ms; `mailer` fails 30% with side effects."""
    rng = np.random.default_rng(1)
    out = []
    for i in range(200):
        failed = rng.random() < 0.4
        out.append(step(2 * i, "fast", "failure" if failed else "success", 20.0 if failed else 100.0, "transient"))
        failed = rng.random() < 0.3
        out.append(
            step(2 * i + 1, "mailer", "failure" if failed else "success", 500.0, "knowledge", True if failed else None)
        )
    return out


def test_failure_kinds_and_side_effects_are_learned_as_shares():
    model = FailureModel().fit(history())
    assert model.durations_ is not None
    est = model.durations_.predict([GroundAction("call", ("fast",)), GroundAction("call", ("mailer",))])
    assert est.transient[0] > 0.9 and est.retried[0] > 0.9 and est.side_effects[0] < 0.1
    assert est.transient[1] < 0.1 and est.side_effects[1] > 0.9 and est.retried[1] < 0.1
    assert est.failure_ms[0] == pytest.approx(20.0, rel=0.05) and est.success_ms[0] == pytest.approx(100.0, rel=0.05)


def test_retries_are_learned_apart_from_first_attempts():
    """A service that is down stays down: its retries (the next step of the same run, after a transient failure)
    fail far more often than its first attempts, and the model counts them."""
    records, rng = [], np.random.default_rng(2)
    for run in range(60):
        down = rng.random() < 0.3
        for i in range(3 if down else 1):
            failed = down or rng.random() < 0.05
            records.append(step(run, "flaky", "failure" if failed else "success", 50.0, "transient"))
            records[-1] = records[-1].model_copy(update={"step": i})
            if not failed:
                break
    est = FailureModel().fit(records).durations_.predict([GroundAction("call", ("flaky",))])
    assert est.retries[0] > 20 and est.failed_retries[0] / est.retries[0] > 0.9


def test_retrain_stores_durations_and_a_store_of_schema_4_opens_with_side_effects(tmp_path):
    """A file written before the side_effects column migrates (old steps read side_effects None) and the
    retrained model keeps its durations through storage."""
    import sqlite_utils

    from traces.rows import STEP_COLUMNS
    from traces.schema import MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / "v4.db"
    db = sqlite_utils.Database(sqlite3.connect(path))
    for migration in MIGRATIONS[:4]:
        migration(db)
    db.execute("PRAGMA user_version = 4")
    old_columns = [c for c in STEP_COLUMNS if c != "side_effects"]
    db.conn.execute(
        f"INSERT INTO steps ({', '.join(old_columns)}) VALUES ('old', 0, 'call', '[\"fast\"]', '{{}}', 'success', "
        "NULL, NULL, 100.0, NULL, NULL, NULL, NULL)"
    )
    db.conn.commit()
    db.conn.close()
    with TraceStore(path) as store:
        [old] = list(store.iter_steps())
        assert old.side_effects is None
        store.record_steps(history())
        assert sum(bool(s.side_effects) for s in store.iter_steps()) > 30
        retrain(store)
        model = load_latest(store)
        [stats] = store.stats()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert model is not None and model.durations_ is not None
    est = model.durations_.predict([GroundAction("call", ("mailer",))])
    assert est.side_effects[0] > 0.9 and est.success_ms[0] == pytest.approx(500.0, rel=0.05)
    assert model.durations_.replan_ms > 0
    assert stats.mean_failure_ms is not None and stats.mean_success_ms is not None
    assert stats.mean_failure_ms < stats.mean_success_ms  # fast's 20 ms failures, mailer's 500 ms both ways
