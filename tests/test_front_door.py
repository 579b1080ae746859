"""One front door: everything a user needs comes from `import portfolio`, typed, and `import portfolio` stays
cheap (names resolve on first use)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from support import REPO

import portfolio
from benchmarks.experiments.cold_start import HEAVY


def test_every_public_name_resolves_to_the_object_its_home_module_defines():
    for name in portfolio.__all__:
        value = getattr(portfolio, name)
        home = importlib.import_module(portfolio._HOMES[name])
        assert value is getattr(home, name), name
    assert set(portfolio.__all__) <= set(dir(portfolio))


def test_an_unknown_name_is_an_attribute_error():
    try:
        portfolio.Plannr  # noqa: B018 - the attribute access is the test
    except AttributeError as error:
        assert "Plannr" in str(error)
    else:
        raise AssertionError("portfolio.Plannr resolved")


def test_import_portfolio_loads_neither_the_planner_nor_scikit_learn():
    code = (
        "import sys, portfolio; "
        "print(sorted(m for m in ('portfolio.planner', 'sklearn', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# what a plain `portfolio plan` needs none of (benchmarks/experiments/cold_start.py measures what leaving it out saves)
NOT_FOR_A_PLAIN_PLAN = HEAVY


def test_a_plain_cli_plan_imports_neither_the_service_nor_the_learning_stack():
    blocks = REPO / "tests" / "data" / "ipc" / "blocks"
    code = (
        "import sys; from portfolio.cli import main; "
        f"code = main(['plan', {str(blocks / 'domain.pddl')!r}, {str(blocks / 'probBLOCKS-4-0.pddl')!r}, "
        "'--no-cache', '--delegates', 'fast-downward,pyperplan', '--budget', '10']); "
        f"print('imported', sorted(m for m in {NOT_FOR_A_PLAIN_PLAN!r} if m in sys.modules)); sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    plan, imported = done.stdout.split("\nimported ")
    assert imported.strip() == "[]"
    from domains.ground_text import parse_ground_action
    from domains.load import load_task
    from domains.validate import validate_plan

    steps = [parse_ground_action(line) for line in plan.splitlines() if line and not line.startswith(";")]
    assert validate_plan(load_task(blocks / "domain.pddl", blocks / "probBLOCKS-4-0.pddl"), steps).ok


def test_the_lazy_packages_give_the_names_they_always_gave():
    """`learning` and `traces` resolve their names on first use; `learning.retrain` is the function, also once
    its submodule is imported, and every name of `traces.__all__` is its home module's object."""
    code = (
        "import learning, traces, importlib; "
        "import learning.retrain as imported; from learning import retrain; "
        "from learning.retrain import retrain as home, load_latest; "
        "assert imported is retrain is home is learning.retrain and learning.load_latest is load_latest; "
        "assert all(getattr(traces, n) is getattr(importlib.import_module(traces._HOMES[n]), n) "
        "for n in traces.__all__); print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.strip() == "ok", out.stderr


def test_plan_record_retrain_and_plan_again_through_the_front_door_only(tmp_path):
    """docs/traces.md's learned-cost loop with nothing but `from portfolio import ...`: the risky shortcut of the
    delivery example is avoided once its failures are recorded and a model is trained."""
    from pathlib import Path

    from portfolio import Planner, StepRecord, TraceStore, load_task, retrain

    examples = Path(__file__).resolve().parents[1] / "domains" / "examples"
    task = load_task(examples / "delivery-domain.pddl", examples / "delivery-1.pddl")
    with Planner() as planner:
        blind = planner.plan(task)
    shortcut = next(step for step in blind.plan if step.startswith("(drive ") and " s d" in step)
    name, *args = shortcut.strip("()").split()
    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        store.record_steps(
            StepRecord(
                run_id="r", step=i, action=name, args=tuple(args), outcome="failure" if i % 10 < 6 else "success"
            )
            for i in range(40)
        )
        retrain(store)
    with Planner(traces=store_path) as planner:
        learned = planner.plan(task)
    from domains.validate import validate_plan

    assert learned.solved and validate_plan(task, learned.actions()).ok
    assert shortcut not in learned.plan


def test_planning_with_a_stored_model_does_not_import_scikit_learn(tmp_path):
    """Prediction needs numpy and scipy.special only; scikit-learn (~1.5 s to import) loads when a model is fit.
    Every `portfolio plan --traces` on a store with a model, and every service worker, paid that import before
    `FailureModel` stopped subclassing `BaseEstimator`: 1.9-2.5 s a CLI plan, 0.9-1.0 s after."""
    from portfolio import StepRecord, TraceStore, retrain

    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        store.record_steps(
            StepRecord(run_id="r", step=i, action="move", args=("a", "b" if i % 2 else "c"), outcome="success")
            for i in range(30)
        )
        retrain(store)
    code = (
        "import sys; from portfolio import TraceStore; from learning.retrain import load_latest; "
        "from domains.model import GroundAction; "
        f"model = load_latest(TraceStore({str(store_path)!r})); "
        "print(model.predict_proba([GroundAction('move', ('a', 'b'))]).round(3).tolist(), 'sklearn' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    probabilities, imported = out.rsplit(" ", 1)
    assert imported.strip() == "False" and 0.0 < json.loads(probabilities)[0] < 0.2


def test_the_reported_training_time_is_the_fit_not_the_first_import_of_scikit_learn(tmp_path):
    """Once scikit-learn loaded on first fit, `portfolio retrain` on 24 steps said "trained in 1.8 s" (the import)
    where it had said 0.0 s: the libraries now load before the clock starts. A fresh process, so the import is
    paid there; retrain's clock is wrapped to note the modules loaded at its start and at its end: no module of
    scikit-learn or scipy may load between the two."""
    code = (
        "import json, sys, types; from portfolio import StepRecord, TraceStore, retrain; "
        "seen = []; clock = lambda: seen.append(set(sys.modules)) or 0.0; "
        "sys.modules[retrain.__module__].time = types.SimpleNamespace(perf_counter=clock); "
        f"store = TraceStore({str(tmp_path / 'traces.db')!r}); "
        "store.record_steps(StepRecord(run_id='r', step=i, action='move', args=('a', 'b' if i % 2 else 'c'), "
        "outcome='failure' if i % 3 == 0 else 'success') for i in range(30)); "
        "sklearn_before = 'sklearn' in sys.modules; retrain(store); "
        "print(json.dumps([sklearn_before, len(seen), sorted(seen[-1] - seen[0])]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    sklearn_before, clock_reads, loaded_while_timed = json.loads(out)
    assert not sklearn_before and clock_reads == 2  # a fresh process: retrain imports scikit-learn, then times
    assert not [m for m in loaded_while_timed if m.split(".")[0] in ("sklearn", "scipy")], loaded_while_timed
