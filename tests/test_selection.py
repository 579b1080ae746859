"""Configuration selection learned from traces: runs record their domain, Fast Downward
attempts record which searches raced, which won and the SAS size; `retrain_selection` ranks each domain's
searches; `Planner(traces=...)` races the ranking's first ones. Old trace files (schema 1) keep working."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest
from support import wait_until

from domains.bundled import bundled_task
from domains.validate import validate_plan
from learning.selection import SelectionFormatError, SelectionModel, load_selection, observations, retrain_selection
from portfolio.cli import main as cli
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.fast_downward.search_plan import Settings
from portfolio.delegates.fast_downward.search_run import command
from portfolio.delegates.fast_downward.searches import RACE_ALIASES, search_aliases
from portfolio.delegates.registry import build_stages
from portfolio.planner import Planner
from traces import TraceStore
from traces.attempt_details import AttemptDetails, StoredAttempt
from traces.schema import MIGRATIONS
from traces.selection import domain_plans


def race(
    winner: str,
    seconds: float,
    raced=("lama-first", "eager-ff-cg", "lazy-cea", "lazy-add"),
    operators: int = 100,
    translator: tuple[str, ...] = (),
) -> StoredAttempt:
    """A Fast Downward attempt as the planner records it: `winner` found the first plan after `seconds`, on a
    task translated with the `translator` flags."""
    searches = {name: "plan found" if name == winner else "killed at the deadline" for name in raced}
    return StoredAttempt(
        delegate="fast-downward",
        status="solved",
        elapsed_ms=seconds * 1000,
        reason="",
        details=AttemptDetails(
            searches=searches, search=winner, sas={"variables": 9, "operators": operators}, translator=list(translator)
        ),
    )


def record(store: TraceStore, domain: str | None, task: str, attempts: list[dict]) -> None:
    run = store.start_run(task, "goal", domain=domain)
    store.record_plan(run, "fast-downward", attempts, 10.0, ["(a)"])


def test_the_configuration_that_solved_the_domain_first_is_raced_first(store_target: str):
    with TraceStore(store_target) as store:
        for i in range(3):  # each configuration alone on each task, as exploration runs record them
            for config, seconds in (("lama-first", 2.0), ("eager-ff-cg", 3.0), ("lazy-cea", 0.2), ("lazy-add", 1.0)):
                record(store, "d1", f"t{i}", [race(config, seconds + i, raced=(config,))])
        for i in range(2):  # too few tasks for a ranking
            record(store, "d2", f"u{i}", [race("lazy-add", 0.1, raced=("lazy-add",))])
        info = retrain_selection(store)
        model = load_selection(store)
    assert info.version == 1 and info.skipped_domains == 1 and list(info.domains) == ["d1"]
    assert model.predict("d1", 100) == ["lazy-cea", "lazy-add", "lama-first", "eager-ff-cg"]
    assert info.domains["d1"]["configs"]["lazy-cea"] == {"solved": 3, "median_s": 1.2}
    assert model.predict("d2", 100) is None and model.predict("never-seen") is None


def test_a_race_winner_beats_the_searches_it_outran(store_target: str):
    with TraceStore(store_target) as store:
        for i in range(3):
            record(store, "d", f"t{i}", [race("eager-ff-cg", 0.5, raced=("lama-first", "eager-ff-cg"))])
        model = SelectionModel().fit(domain_plans(store))
    assert model.predict("d")[:2] == ["eager-ff-cg", "lama-first"]


def test_tasks_of_similar_size_weigh_more():
    plans = []
    for i in range(3):
        for size, best in ((50, "lazy-cea"), (5000, "lazy-add")):
            for config in ("lazy-cea", "lazy-add"):
                seconds = 0.1 if config == best else 0.4
                plans.append(
                    type(
                        "P",
                        (),
                        {
                            "domain": "d",
                            "fingerprint": f"{size}-{i}",
                            "attempts": [race(config, seconds, (config,), size)],
                        },
                    )
                )
    model = SelectionModel(min_tasks=3).fit(plans)
    assert model.predict("d", 60)[0] == "lazy-cea"
    assert model.predict("d", 4000)[0] == "lazy-add"
    assert SelectionModel(size_halving=None).fit(plans).predict("d", 60)[0] == "lazy-cea"  # a tie: first seen


def test_model_is_json_and_rejects_damage():
    plans = [
        type("P", (), {"domain": "d", "fingerprint": f"t{i}", "attempts": [race("lazy-cea", 0.3)]}) for i in range(3)
    ]
    model = SelectionModel().fit(plans)
    again = SelectionModel.from_json(model.to_json())
    assert again.predict("d", 100) == model.predict("d", 100) and again.get_params() == model.get_params()
    for bad in ("not json", json.dumps({"format": "other"}), model.to_json().replace('"times"', '"x"')):
        with pytest.raises(SelectionFormatError, match="portfolio retrain"):
            SelectionModel.from_json(bad)


def test_attempts_without_a_race_teach_nothing():
    plans = [
        type(
            "P",
            (),
            {
                "domain": "d",
                "fingerprint": "t",
                "attempts": [
                    StoredAttempt(
                        delegate="fast-downward",
                        status="solved",
                        elapsed_ms=3,
                        details=AttemptDetails(search="in-process"),
                    ),
                    StoredAttempt(delegate="pyperplan", status="solved", elapsed_ms=3, details=AttemptDetails()),
                    StoredAttempt(delegate="fast-downward", status="timeout", elapsed_ms=900, details=AttemptDetails()),
                    race("lama-first", 0.5, ("lama-first", "lama-costs"))
                    | StoredAttempt(
                        details=AttemptDetails(costs=True, search="lama-first", searches={"lama-first": "plan found"})
                    ),
                ],
            },
        )
    ]
    assert observations(plans) == {}


def test_an_order_replaces_the_fixed_race():
    assert search_aliases(Settings(workers=2), False, ["lazy-add", "lazy-cea"]) == ["lazy-add", "lazy-cea"]
    assert search_aliases(Settings(workers=2), False, ["lazy-add"]) == ["lazy-add", "lama-first"]
    assert search_aliases(Settings(workers=2), False, ["no-such"]) == ["lama-first", "eager-ff-cg"]
    assert search_aliases(Settings(workers=2), True, ["lazy-add"]) == ["lazy-add", "lama-costs"]
    assert search_aliases(Settings(workers=2), True, None) == ["lama-first", "lama-costs"]
    assert search_aliases(Settings(alias="seq-opt-lmcut", workers=2), False, ["lazy-add"]) == ["seq-opt-lmcut"]


def learn_selection(store: TraceStore, task, attempts: list) -> None:
    """Three tasks of `task`'s domain recorded, each with the same `attempts`; the selection model retrained."""
    for i in range(3):
        record(store, task.domain_fingerprint, f"t{i}", attempts)
    retrain_selection(store)


def test_planner_races_the_learned_choice_and_records_what_it_learns_from(tmp_path):
    """Real Fast Downward: recorded attempts say lazy-add then lazy-cea solve this domain first, so the next
    task of the domain races exactly those two (not the fixed lama-first + eager-ff-cg), and its valid plan is
    recorded with the domain, the raced searches and the SAS size: the next retrain's data."""
    db = tmp_path / "t.db"
    task = bundled_task("blocksworld", 6, seed=3)
    with TraceStore(db) as store:
        attempts = [
            race("lazy-add", 0.2, ("lazy-add",)),
            race("lazy-cea", 0.3, ("lazy-cea",)),
            race("lama-first", 0.9, ("lama-first", "eager-ff-cg")),
        ]
        learn_selection(store, task, attempts)
    with Planner(build_stages(["fast-downward"], 30.0, fd_workers=2), traces=db) as planner:
        result = planner.plan(task)
    assert result.solved and validate_plan(task, result.actions()).ok
    details = result.attempts[0].details
    assert details["selection"] == "learned" and sorted(details["searches"]) == ["lazy-add", "lazy-cea"]
    with TraceStore(db) as store:
        recorded = [p for p in domain_plans(store) if p.fingerprint == task.fingerprint]
        found = observations(recorded)[task.domain_fingerprint][task.fingerprint][""]  # the default translation
    assert found.operators == details["sas"]["operators"] > 0
    assert set(found.times) == {"lazy-add", "lazy-cea"} and found.times[details["search"]][1]


def test_under_learned_costs_the_selection_chooses_the_coverage_search(tmp_path):
    """With a failure model every plan has (learned) costs, so the cost-aware searches run: beside the anytime
    search, on a task too large for A* to prove optimality on, the second core runs the domain's learned first
    choice for coverage (it was always lama-first: the selection went unused once a store had a failure model);
    on a small task A* takes that core; under quality "first" the cost-blind member of the pair is the choice."""
    from learning.retrain import retrain
    from traces.records import StepRecord

    db = tmp_path / "t.db"
    task = bundled_task("blocksworld", 6, seed=3)
    with TraceStore(db) as store:
        learn_selection(store, task, [race("lazy-add", 0.2, ("lazy-add",)), race("lama-first", 0.9, ("lama-first",))])
        run = store.start_run("steps", "goal")
        store.record_steps(
            StepRecord(
                run_id=run,
                step=i,
                action="pick-up",
                args=("b1",),
                features={},
                outcome="failure" if i % 3 == 0 else "success",
            )
            for i in range(30)
        )
        retrain(store, holdout_fraction=0.0)
    with Planner(build_stages(["fast-downward"], 30.0, fd_workers=2), traces=db) as planner:
        assert planner.model is not None and planner.selection is not None
        fd = planner.fast_downward
        fd.settings = replace(fd.settings, inprocess_max_operators=0)  # the search processes (test_sas_astar.py)
        small = planner.plan(task)
        first = planner.plan(task, quality="first")
        fd.settings = replace(fd.settings, exact_max_operators=0)  # as on a large task
        large = planner.plan(task)
    searches = {}
    for name, result in (("small", small), ("first", first), ("large", large)):
        assert result.solved and validate_plan(task, result.actions()).ok
        assert result.attempts[0].details["selection"] == "learned"
        searches[name] = list(result.attempts[0].details["searches"])
    assert searches == {
        "small": ["anytime-wastar", "seq-opt-lmcut"],
        "first": ["lazy-add", "lama-costs"],
        "large": ["anytime-wastar", "lazy-add"],
    }


def test_a_selection_loaded_after_start_has_its_searches_started(tmp_path):
    """The service makes its planner before it loads the selection (`load_model=False`): the configurations a
    selection may race are started when it is loaded, as when the planner starts with one."""
    db = tmp_path / "t.db"
    with TraceStore(db) as store:
        for i in range(3):
            record(store, "d", f"t{i}", [race("lazy-add", 0.2, raced=("lazy-add",))])
        retrain_selection(store)
    with Planner([FastDownward(workers=1)], traces=db, load_model=False) as planner:
        fd = planner.fast_downward
        assert fd is not None and planner.selection is None
        selectable = [command(alias) for alias in RACE_ALIASES]
        assert not set(selectable) & set(command(alias) for alias in fd.warm_searches())  # started for it alone
        planner.reload_selection()
        assert planner.selection is not None
        ready = fd._searches._ready
        wait_until(lambda: all(c in ready for c in selectable), 10, "the selectable searches to be started")


def test_without_a_selection_model_the_fixed_order_races(tmp_path):
    task = bundled_task("blocksworld", 5, seed=1)
    with Planner(build_stages(["fast-downward"], 30.0, fd_workers=2), traces=tmp_path / "t.db") as planner:
        assert planner.selection is None
        result = planner.plan(task)
    assert result.solved and list(result.attempts[0].details["searches"]) == ["lama-first", "eager-ff-cg"]
    assert "selection" not in result.attempts[0].details


def old_trace_file(path) -> None:
    """A trace file as schema 1 wrote it: runs without a domain column, no selection_models table."""
    import sqlite_utils

    db = sqlite_utils.Database(sqlite3.connect(path))
    MIGRATIONS[0](db)
    db.execute("PRAGMA user_version = 1")
    db["runs"].insert({"id": "r1", "fingerprint": "f", "goal": "g", "started": "2026-01-01"})
    db["plans"].insert(
        {
            "run_id": "r1",
            "delegate": "fast-downward",
            "attempts": json.dumps([race("lazy-add", 0.1)]),
            "latency_ms": 5.0,
            "plan": "[]",
            "recorded": "2026-01-01",
        }
    )
    db.conn.commit()
    db.conn.close()


def test_an_old_trace_file_opens_migrates_and_keeps_the_fixed_order(tmp_path):
    db = tmp_path / "old.db"
    old_trace_file(db)
    with TraceStore(db) as store:
        assert store.get_run("r1").domain is None and store.plans("r1")[0]["delegate"] == "fast-downward"
        assert list(domain_plans(store)) == []  # runs without a domain teach nothing
        info = retrain_selection(store)
        assert info.version is None and load_selection(store) is None
    task = bundled_task("blocksworld", 4, seed=1)
    with Planner(build_stages(["fast-downward"], 30.0, fd_workers=2), traces=db) as planner:
        result = planner.plan(task)
    assert result.solved and list(result.attempts[0].details["searches"]) == ["lama-first", "eager-ff-cg"]
    with TraceStore(db) as store:
        assert [p.domain for p in domain_plans(store)] == [task.domain_fingerprint]


def test_retrain_cli_fits_selection_without_steps(tmp_path, capsys):
    db = tmp_path / "t.db"
    with TraceStore(db) as store:
        for i in range(3):
            record(store, "abc", f"t{i}", [race("lazy-cea", 0.4, ("lama-first", "lazy-cea"))])
    assert cli(["retrain", "--traces", str(db)]) == 0
    out = capsys.readouterr().out
    assert "selection model version 1: 1 domain(s)" in out and "domain abc: 3 tasks -> race lazy-cea, lama-first" in out
    assert cli(["retrain", "--traces", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["selection"]["domains"]["abc"]["ranking"][0] == "lazy-cea"
    assert cli(["retrain", "--traces", str(db), "--keep", "1"]) == 0
    capsys.readouterr()
    with TraceStore(db) as store:
        assert [v for (v,) in store.db.execute("SELECT version FROM selection_models")] == [3]
    assert cli(["retrain", "--traces", str(db), "--min-tasks", "4"]) == 2  # no steps, and too few tasks
    err = capsys.readouterr().err
    assert "no steps" in err and "configuration selection" in err and "Traceback" not in err
    assert cli(["retrain", "--traces", str(db), "--min-tasks", "0"]) == 2


KEEP = ("--keep-unreachable-facts",)
SKIP = ("--keep-unreachable-facts", "--skip-variable-reordering")


def test_the_translator_variant_the_traces_show_faster_is_chosen(store_target: str):
    """Per domain, the translation whose tasks reached a plan sooner (each with its own best race) is chosen;
    one within the margin of the defaults, or never recorded, leaves the driver's defaults."""
    with TraceStore(store_target) as store:
        for i in range(3):
            for config, seconds in (("lama-first", 1.0), ("lazy-add", 1.2)):
                record(store, "fast", f"f{i}", [race(config, seconds, (config,))])
                record(
                    store,
                    "fast",
                    f"f{i}",
                    [race(config, seconds - 0.5 if config == "lazy-add" else 0.9, (config,), translator=SKIP)],
                )
                record(store, "fast", f"f{i}", [race(config, seconds - 0.1, (config,), translator=KEEP)])
                record(store, "same", f"s{i}", [race(config, seconds, (config,))])
                record(store, "same", f"s{i}", [race(config, seconds * 0.98, (config,), translator=KEEP)])
                record(store, "plain", f"p{i}", [race(config, seconds, (config,))])
        info = retrain_selection(store)
        model = load_selection(store)
    assert model.predict_translator("fast") == SKIP  # 0.7 s vs 1.0 s (KEEP: 0.9 s)
    assert model.predict("fast", translator=SKIP)[0] == "lazy-add"  # that variant's own ranking...
    assert model.predict("fast")[0] == "lama-first"  # ...and the defaults'
    assert model.predict_translator("same") == () and model.predict_translator("plain") == ()
    assert model.predict_translator("unknown") == ()
    assert info.domains["fast"]["translator"] == list(SKIP) and info.domains["fast"]["tasks"] == 3
    assert (
        SelectionModel(translator_margin=0.5).fit(domain_plans(TraceStore(store_target))).predict_translator("fast")
        == ()
    )  # 0.7x is not twice as fast


def test_a_version_1_model_reads_as_records_of_the_default_translation():
    plans = [
        type("P", (), {"domain": "d", "fingerprint": f"t{i}", "attempts": [race("lazy-cea", 0.3)]}) for i in range(3)
    ]
    document = json.loads(SelectionModel().fit(plans).to_json())
    document["format_version"] = 1
    document["params"].pop("translator_margin")
    document["domains"]["d"] = [task[""] for task in document["domains"]["d"]]
    old = SelectionModel.from_json(json.dumps(document))
    assert old.predict("d", 100)[0] == "lazy-cea" and old.predict_translator("d") == ()


def test_planner_translates_with_the_learned_variant_and_records_it(tmp_path):
    """Real Fast Downward: records say the variant reached plans sooner on this domain, so the next task is
    translated with its flags (chosen before translation), the plan is valid, and the attempt records the
    flags the next retrain reads."""
    db = tmp_path / "t.db"
    task = bundled_task("blocksworld", 6, seed=3)
    with TraceStore(db) as store:
        for i in range(3):
            record(store, task.domain_fingerprint, f"t{i}", [race("lama-first", 0.9, ("lama-first",))])
            record(store, task.domain_fingerprint, f"t{i}", [race("lama-first", 0.3, ("lama-first",), translator=KEEP)])
        retrain_selection(store)
    with Planner(build_stages(["fast-downward"], 30.0, fd_workers=2), traces=db) as planner:
        result = planner.plan(task)
        assert [options for _, options in planner.fast_downward._memory.keys()] == [KEEP]
    assert result.solved and validate_plan(task, result.actions()).ok
    details = result.attempts[0].details
    assert details["translator"] == list(KEEP) and details["selection"] == "learned"
    with TraceStore(db) as store:
        recorded = [p for p in domain_plans(store) if p.fingerprint == task.fingerprint]
        assert list(observations(recorded)[task.domain_fingerprint][task.fingerprint]) == [" ".join(KEEP)]
