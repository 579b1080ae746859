"""The poison guard (`learning.guard`) on a real trace store, steps recorded with their principals as the service
records them (`traces.provenance`):

- the fabricated case: a model with p_fail ~0.02 for `(pick-up b)` from 200 steps of two principals; a third posts
  300 failures of it at once. Held back: p_fail does not move (without the guard it would go to ~0.9);
- a real outage: three principals each report 20 failures of it. Kept: p_fail rises;
- what a held batch becomes: held again while nothing changes, fitted with `include_held` or without the guard,
  kept once another principal reports the same; fabricated successes of a failing action are held too; steps
  without provenance (the CLI's, the Python API's) are never held; a tenant's first model holds nothing.

The numbers each case measures are printed (`pytest -s`) and quoted in docs/service-security.md.
"""

from __future__ import annotations

import itertools

import pytest

from domains.model import GroundAction
from learning.retrain import load_latest, retrain
from traces.provenance import note_provenance
from traces.records import StepRecord
from traces.store import TraceStore

TENANT = "a"
PICK_B = GroundAction("pick-up", ("b",))
_runs = itertools.count()


def post(store: TraceStore, principal: str | None, outcomes: str, action: tuple[str, ...] = ("pick-up", "b")) -> None:
    """Steps of `action` in tenant `a`, one run each, 'f' a failure and 's' a success, posted by `principal`
    (None: recorded without provenance, as the CLI and the Python API record)."""
    records = [
        StepRecord(
            run_id=f"@{TENANT}/r{next(_runs)}",
            step=0,
            action=action[0],
            args=action[1:],
            outcome="failure" if o == "f" else "success",
        )
        for o in outcomes
    ]
    store.record_steps(records)
    if principal is not None:
        note_provenance(store, [(r.run_id, r.step) for r in records], TENANT, principal)


def p_fail(store: TraceStore) -> float:
    model = load_latest(store, TENANT)
    assert model is not None
    return float(model.predict_proba([PICK_B])[0])


def honest_history(store: TraceStore) -> float:
    """200 steps of (pick-up b) from two principals, 4 failures, and other actions around them; the first
    model's p_fail of (pick-up b)."""
    for principal in ("agent-1", "agent-2"):
        post(store, principal, ("s" * 49 + "f") * 2)
        post(store, principal, "s" * 30, ("pick-up", "a"))
        post(store, principal, "s" * 20 + "f", ("stack", "a", "b"))
    retrain(store, tenant=TENANT)
    return p_fail(store)


@pytest.fixture
def store(store_target):
    with TraceStore(store_target) as opened:
        yield opened


def test_fabricated_failures_of_one_principal_are_held_and_move_nothing(store):
    before = honest_history(store)
    assert 0.01 < before < 0.04
    post(store, "intruder", "f" * 300)
    info = retrain(store, tenant=TENANT)
    after = p_fail(store)
    assert after == before
    assert [(h.principal, h.action, h.steps, h.failures, h.direction) for h in info.held] == [
        ("intruder", "(pick-up b)", 300, 300, "failures")
    ]
    held = info.held[0]
    assert held.tenant == TENANT and held.expected_p_fail == pytest.approx(before, abs=1e-6)
    assert held.log10_p < -100
    assert info.n_steps == store.count_steps(tenant=TENANT) - 300
    unguarded = retrain(store, tenant=TENANT, guard=False)
    poisoned = p_fail(store)
    assert unguarded.held == [] and poisoned > 0.8
    chance = f"p = 10^{held.log10_p:.0f}"
    print(f"\nfabricated: p_fail {before:.3f} -> {after:.3f}, held ({chance}); unguarded: {poisoned:.3f}")


def test_an_outage_that_three_principals_report_is_kept(store):
    before = honest_history(store)
    for _ in range(20):  # interleaved, as agents working at once report them
        for principal in ("agent-1", "agent-2", "agent-3"):
            post(store, principal, "f")
    info = retrain(store, tenant=TENANT)
    after = p_fail(store)
    assert info.held == []
    assert after > 0.15
    print(f"\noutage: p_fail {before:.3f} -> {after:.3f}, nothing held")


def test_a_batch_just_below_the_threshold_passes(store):
    """What the guard does not stop: 38 failures among 300 steps (p = 10^-5.9 against the model, above the
    10^-6 threshold) are fitted and move p_fail; 39 are held."""
    import random

    from learning.guard import log10_tails

    before = honest_history(store)
    model = load_latest(store, TENANT)
    assert model is not None
    mean, concentration = (float(x[0]) for x in model.predict_posterior([PICK_B]))
    assert log10_tails(38, 300, mean, concentration)[0] > -6 > log10_tails(39, 300, mean, concentration)[0]
    outcomes = list("f" * 38 + "s" * 262)
    random.Random(1).shuffle(outcomes)
    post(store, "intruder", "".join(outcomes))
    assert retrain(store, tenant=TENANT).held == []
    after = p_fail(store)
    assert after > 0.1
    print(f"\n38 failures in 300: p_fail {before:.3f} -> {after:.3f}, not held")


def test_a_held_batch_stays_held_until_released_or_agreed_with(store):
    before = honest_history(store)
    post(store, "intruder", "f" * 300)
    assert len(retrain(store, tenant=TENANT).held) == 1
    post(store, "agent-1", "s" * 10)  # business as usual
    again = retrain(store, tenant=TENANT)
    assert [(h.principal, h.steps) for h in again.held] == [("intruder", 300)]
    assert p_fail(store) < before + 0.01
    released = retrain(store, tenant=TENANT, include_held=True)
    # fitted (the 10 successes after them read as a recovery: `learning.changes`)
    assert released.held == [] and released.n_steps == store.count_steps(tenant=TENANT)
    assert retrain(store, tenant=TENANT).held == []  # once released, no longer new: not held again


def test_a_held_batch_is_kept_once_another_principal_sees_the_same(store):
    honest_history(store)
    post(store, "agent-3", "f" * 30)  # one agent alone sees an outage: held
    assert [(h.principal, h.steps) for h in retrain(store, tenant=TENANT).held] == [("agent-3", 30)]
    post(store, "agent-1", "f" * 12)  # then another sees it too: both kept
    info = retrain(store, tenant=TENANT)
    assert info.held == [] and p_fail(store) > 0.5


def test_fabricated_successes_of_a_failing_action_are_held(store):
    for principal in ("agent-1", "agent-2"):
        post(store, principal, ("f" * 9 + "s") * 5)
    retrain(store, tenant=TENANT)
    before = p_fail(store)
    assert before > 0.8
    post(store, "intruder", "s" * 100)
    info = retrain(store, tenant=TENANT)
    assert [(h.principal, h.direction, h.steps) for h in info.held] == [("intruder", "successes", 100)]
    assert p_fail(store) == before


def test_steps_without_provenance_are_trusted(store):
    honest_history(store)
    post(store, None, "f" * 300)  # recorded locally: the CLI's, the Python API's
    info = retrain(store, tenant=TENANT)
    assert info.held == [] and p_fail(store) > 0.8


def test_a_tenants_first_model_holds_nothing_and_a_small_batch_is_not_tested(store, request):
    post(store, "agent-1", "s" * 100)
    post(store, "intruder", "f" * 300)
    assert retrain(store, tenant=TENANT).held == []  # nothing to compare with yet
    second = store.path.replace("t.db", "u.db") if store.backend.name == "sqlite" else None
    with TraceStore(second or request.getfixturevalue("postgres_url")) as other:
        honest_history(other)
        post(other, "intruder", "f" * 9)  # fewer than MIN_STEPS
        assert retrain(other, tenant=TENANT).held == []


def test_the_tail_probabilities_are_the_beta_binomials():
    from scipy.stats import betabinom

    from learning.guard import log10_tails

    for failures, steps, p, c in [(0, 10, 0.02, 200.0), (3, 10, 0.02, 200.0), (7, 20, 0.3, 15.0), (20, 20, 0.5, 2.0)]:
        upper, lower = log10_tails(failures, steps, p, c)
        a, b = p * c, (1 - p) * c
        assert 10**upper == pytest.approx(betabinom.sf(failures - 1, steps, a, b), rel=1e-9)
        assert 10**lower == pytest.approx(betabinom.cdf(failures, steps, a, b), rel=1e-9)
    assert log10_tails(300, 300, 0.02, 210.0)[0] < -100  # finite where the tail itself underflows to 0


def test_a_batch_that_fails_half_way_is_retried_with_its_provenance(tmp_path, monkeypatch):
    """A failure after the steps are written but before their provenance is (a crash, a lost connection) must
    not leave them stored without it: the client's retry under the same Idempotency-Key would be answered as
    recorded, and steps without provenance are trusted by the guard. Steps and provenance are one transaction."""
    import httpx
    from test_service_helpers import config, serve_in_thread

    from portfolio.serve.keys import add_key
    from traces.provenance import provenance

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        key = add_key(store, "agent-1", TENANT, "steps:write")
        backend = type(store.backend)
    insert_rows, failed = backend.insert_rows, []

    def flaky(self, conn, table, *args, **kwargs):
        if table == "step_provenance" and not failed:
            failed.append(table)
            raise OSError("connection lost")
        return insert_rows(self, conn, table, *args, **kwargs)

    monkeypatch.setattr(backend, "insert_rows", flaky)
    steps = {"steps": [{"run_id": "r1", "step": i, "action": "(pick-up b)", "outcome": "failure"} for i in range(3)]}
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "batch-1"}
    with serve_in_thread(config(traces=db)) as (url, service):
        first = httpx.post(url + "/v1/steps", json=steps, headers=headers, timeout=30)
        assert failed and first.status_code >= 500
        again = httpx.post(url + "/v1/steps", json=steps, headers=headers, timeout=30)
        assert again.status_code == 200, again.text
        assert [(p[0], p[1], p[2]) for p in provenance(service.store, f"@{TENANT}/r1")] == [
            (i, TENANT, "agent-1") for i in range(3)
        ]
        assert service.store.count_steps() == 3
