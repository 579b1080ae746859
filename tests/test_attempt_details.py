"""The schema of an attempt's details (`traces.attempt_details`): what the delegates write on real plans is
declared there with its type, what the code reads is declared, and details stored before the schema read back
byte for byte. Every plan here is checked by the validator."""

from __future__ import annotations

import json
import re
import time

import pytest
from support import IPC, REPO, smallest_problems

from domains.load import load_json_task, load_task
from domains.validate import apply, validate_plan
from learning.selection import observations
from portfolio.delegates.decompose import SubgoalSolver
from portfolio.delegates.goal_agenda import GoalAgenda
from portfolio.delegates.typed_search import TypedSearch
from portfolio.engine.results import Attempt, PlanRequest, PlanResult
from portfolio.planner import REUSE_DELEGATE, Planner
from traces import TraceStore
from traces.attempt_details import DETAIL_KEYS, AttemptDetails, details_of, problems
from traces.selection import domain_plans

EXAMPLES = REPO / "domains" / "examples"


def ipc(domain: str, problem: str):
    return load_task(IPC / domain / "domain.pddl", IPC / domain / problem)


def after(task, plan, steps: int):
    state = task.problem.init
    for step in plan[:steps]:
        state = apply(task, state, step)
    return state


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[tuple[str, PlanResult]]:
    """Real plans with the default cascade and the decomposer's delegates, each (what, its result): a first plan
    (the race), a replan from another state (the in-process search on the re-used translation), a replan that
    keeps the previous plan (plan reuse), a task with action costs (the cost-aware searches), the examples'
    JSON and PDDL tasks, the goal agenda, the typed search."""
    blocks = ipc("blocks", "probBLOCKS-5-0.pddl")
    elevators = load_task(
        IPC / "elevators-sat08-strips" / "domain.pddl", smallest_problems("elevators-sat08-strips", 1)[0]
    )
    results: list[tuple[str, PlanResult]] = []
    checked = []
    with Planner(budget_s=10.0) as planner:  # what is written is tested, not speed
        first = planner.plan(blocks)
        plan = first.actions()
        results.append(("blocks", first))
        checked.append((blocks, first, None))
        middle = after(blocks, plan, len(plan) // 2)
        replan = planner.plan(blocks, init=middle)
        results.append(("blocks replan", replan))
        checked.append((blocks, replan, middle))
        kept = after(blocks, plan, 2)
        reused = planner.plan(blocks, init=kept, previous_plan=[str(a) for a in plan[2:]])
        results.append(("blocks plan reuse", reused))
        checked.append((blocks, reused, kept))
        for what, task in [
            ("elevators (action costs)", elevators),
            ("examples/blocks-task.json", load_json_task(EXAMPLES / "blocks-task.json")),
            ("examples/delivery-1.pddl", load_task(EXAMPLES / "delivery-domain.pddl", EXAMPLES / "delivery-1.pddl")),
        ]:
            result = planner.plan(task)
            results.append((what, result))
            checked.append((task, result, None))
    agenda_task = ipc("blocks", "probBLOCKS-6-0.pddl")
    with GoalAgenda(SubgoalSolver(classical=("fast-downward",))) as agenda:
        outcome = agenda.solve(PlanRequest(agenda_task), time.monotonic() + 20)
    results.append(("goal agenda", _as_result("goal-agenda", outcome)))
    checked.append((agenda_task, results[-1][1], None))
    outcome = TypedSearch().solve(PlanRequest(blocks), time.monotonic() + 10)
    results.append(("typed search", _as_result("typed-search", outcome)))
    checked.append((blocks, results[-1][1], None))
    for task, result, init in checked:
        assert result.solved, result
        assert validate_plan(task, result.actions(), init=init).ok
    return results


def _as_result(delegate: str, outcome) -> PlanResult:
    """A delegate's outcome as the cascade records it."""
    attempt = Attempt(delegate=delegate, status=outcome.status, elapsed_ms=1.0, details=outcome.details)
    plan = [str(step) for step in outcome.plan or []]
    return PlanResult(status=outcome.status, plan=plan, delegate=delegate, attempts=[attempt])


def test_every_key_written_on_real_plans_is_declared_with_its_type(written):
    seen: set[str] = set()
    for what, result in written:
        for attempt in result.attempts:
            assert problems(attempt.details) == [], (what, attempt.delegate, attempt.details)
            seen |= set(attempt.details)
    # The plans above reach these writers: an empty or partial run would pass the check above vacuously.
    assert {
        "translate_ms",
        "translation",
        "translation_reused",
        "translator",
        "sas",
        "search",
        "searches",
        "in_process",
        "costs",
        "quality",
        "plans",
        "optimal",
        "offset",
        "previous_length",
        "agenda",
        "agenda_steps",
        "method",
        "expanded",
    } <= seen, sorted(seen)
    assert any(a.delegate == REUSE_DELEGATE for _, r in written for a in r.attempts)


def test_the_store_keeps_the_details_as_written(written, store_target: str):
    with TraceStore(store_target) as store:
        for what, result in written:
            run = store.start_run(what, "goal", domain="d")
            store.record_plan(run, result.delegate, result.attempts, result.elapsed_ms, result.plan)
        rows = [json.loads(text) for (text,) in store.db.execute("SELECT attempts FROM plans ORDER BY id")]
        stored = list(domain_plans(store))
    assert rows == [[a.model_dump(mode="json") for a in result.attempts] for _, result in written]
    assert [p.attempts for p in stored] == rows
    for attempts in rows:
        for attempt in attempts:
            assert problems(details_of(attempt)) == [], attempt


def test_the_checker_names_an_undeclared_key_and_a_wrong_type():
    """`problems` is what the tests above rely on: it must see a writer's slip."""
    assert problems(AttemptDetails(search="lama-first", sas={"variables": 3, "operators": 7})) == []
    found = problems(
        {"search": 3, "sas": {"variables": 3}, "plans": [{"search": "x", "cost": True, "ms": 1}], "new": 1}
    )
    assert found == [
        "details: undeclared key 'new'",
        "details['search']: expected str, got 3",
        "details['sas']: missing key 'operators'",
        "details['plans'][0]['cost']: expected float, got True",
    ]


# A Fast Downward attempt as a release before the schema stored it (`plans.attempts`), byte for byte, with a key
# no release declares (a store may hold what a later or earlier release wrote).
OLD_ATTEMPTS = (
    '[{"delegate": "fast-downward", "status": "solved", "elapsed_ms": 41.5, "reason": "", "details": '
    '{"translate_ms": 12.25, "translation": "translated", "translation_reused": false, "translator": [], '
    '"sas": {"variables": 9, "operators": 40}, "selection": "fixed", "searches": {"lama-first": "plan found", '
    '"eager-ff-cg": "stopped: lama-first found a plan first"}, "search": "lama-first", "retired_key": 1}}]'
)


def test_details_stored_before_the_schema_read_back_unchanged(store_target: str):
    (attempt,) = json.loads(OLD_ATTEMPTS)
    model = Attempt.model_validate(attempt)
    assert model.details == attempt["details"]  # nothing dropped or coerced on the way in
    assert json.dumps([model.model_dump(mode="json")]) == OLD_ATTEMPTS  # nor on the way out
    with TraceStore(store_target) as store:
        run = store.start_run("t", "goal", domain="d")
        store.record_plan(run, "fast-downward", json.loads(OLD_ATTEMPTS), 41.5, ["(a)"])
        (text,) = store.db.execute("SELECT attempts FROM plans").fetchone()
        plans = list(domain_plans(store))
    assert text == OLD_ATTEMPTS
    record = observations(plans)["d"]["t"][""]
    assert record.operators == 40 and set(record.times) == {"lama-first", "eager-ff-cg"}
    assert record.times["lama-first"] == (pytest.approx(0.0415), True)
    assert record.times["eager-ff-cg"] == (pytest.approx(0.0415), False)
    assert problems(details_of(attempt)) == ["details: undeclared key 'retired_key'"]


# A details key named in the source: subscripted, read with `get` or `setdefault`, on `details` or `["details"]`.
USES = re.compile(r"""details(?:"\])?(?:\[|\.get\(|\.setdefault\()\s*["'](\w+)["']""")


def test_every_key_the_code_names_is_declared():
    """Readers too (the benchmarks and tests are not type-checked): a key read that no writer declares is a typo
    or a key left behind."""
    named: dict[str, set[str]] = {}
    for folder in ("portfolio", "learning", "traces", "benchmarks", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            for key in USES.findall(path.read_text()):
                named.setdefault(key, set()).add(str(path.relative_to(REPO)))
    assert "searches" in named and "translate_ms" in named  # the pattern finds the uses it is for
    undeclared = {key: sorted(paths) for key, paths in named.items() if key not in DETAIL_KEYS}
    assert undeclared == {}
