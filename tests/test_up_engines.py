"""The portfolio reached through unified-planning's factory (`import portfolio.up`): `OneshotPlanner(name=
"portfolio")` solves UP's own example problems with plans UP's validator accepts, answers everything else with a
status, honours a timeout with nothing left running, and plans under learned costs from the `traces` param;
`PlanValidator(name="portfolio")` is the project's validator; `Planner.plan` and `load_task` take a UP problem."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
from support import IPC, descendants, hardest_parking, poll, record, smallest_problems
from unified_planning.engines import PlanGenerationResultStatus as UpStatus
from unified_planning.engines import ValidationResultStatus
from unified_planning.io import PDDLReader
from unified_planning.plans import ActionInstance, SequentialPlan
from unified_planning.shortcuts import OneshotPlanner, PlanValidator, get_environment

import portfolio.up  # registers the engines
from domains.bundled import write_instance
from domains.validate import validate_plan
from learning.retrain import retrain
from traces.store import TraceStore

SOLVED = (UpStatus.SOLVED_SATISFICING, UpStatus.SOLVED_OPTIMALLY)


pytestmark = pytest.mark.usefixtures("quiet_up_credits", "own_folder")


def test_importing_portfolio_up_registers_the_engine_once() -> None:
    factory = get_environment().factory
    assert "portfolio" in factory.engines
    portfolio.up.register()  # a second registration changes nothing
    assert factory.engines.count("portfolio") == 1


def test_an_up_ini_registers_it_without_the_import(tmp_path) -> None:
    import subprocess
    import sys

    (tmp_path / "up.ini").write_text(
        "[engine portfolio]\nmodule_name = portfolio.up.engine\nclass_name = PortfolioEngine\n"
    )
    code = (
        "from unified_planning.shortcuts import OneshotPlanner\n"
        "from unified_planning.test.examples import get_example_problems\n"
        "with OneshotPlanner(name='portfolio') as planner:\n"
        "    print(planner.solve(get_example_problems()['basic'].problem).status.name)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-1] == "SOLVED_SATISFICING"


@pytest.mark.slow
def test_every_example_fast_downward_solves_is_solved_and_the_rest_get_a_status() -> None:
    """UP's own example problems: where UP's `fast-downward` engine solves one, ours does too; every plan ours
    returns is one UP's validator accepts; every other example is answered with a status, not raised."""
    from unified_planning.test.examples import get_example_problems

    solved_by_both, statuses = 0, {}
    with (
        OneshotPlanner(name="portfolio") as ours,
        OneshotPlanner(name="fast-downward") as fast_downward,
        PlanValidator(name="sequential_plan_validator") as validator,
    ):
        validator.skip_checks = True  # its kind check refuses static cost fluents its simulator evaluates
        for name, example in get_example_problems().items():
            problem = example.problem
            reference = None
            if fast_downward.supports(problem.kind):
                reference = fast_downward.solve(problem, timeout=10).status
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # UP warns that it "cannot establish" support, then asks us
                result = ours.solve(problem, timeout=10)
            assert isinstance(result.status, UpStatus), name
            statuses[result.status] = statuses.get(result.status, 0) + 1
            if result.status in SOLVED:
                assert validator.validate(problem, result.plan).status is ValidationResultStatus.VALID, name
                assert all(a.action is problem.action(a.action.name) for a in result.plan.actions), name
            if reference in SOLVED:
                assert result.status in SOLVED, (name, result.log_messages)
                solved_by_both += 1
            if not ours.supports(problem.kind):
                assert result.status is UpStatus.UNSUPPORTED_PROBLEM, name
    # unified-planning 1.3's 66 examples: the 20 Fast Downward solves, 1 more (locations_connected_cost_minimize:
    # whole costs UP calls real, which its Fast Downward engine does not take), 45 of kinds outside ours
    # (numeric fluents, durative actions, scheduling, multi-agent, ...)
    assert solved_by_both >= 20
    assert set(statuses) <= {*SOLVED, UpStatus.UNSUPPORTED_PROBLEM}, statuses
    assert sum(statuses.get(status, 0) for status in SOLVED) >= 21, statuses


def test_a_problem_outside_the_supported_kind_is_unsupported_not_raised() -> None:
    from unified_planning.test.examples import get_example_problems

    examples = get_example_problems()
    with OneshotPlanner(name="portfolio") as ours:
        for name in ("robot", "matchcellar"):  # numeric fluents; durative actions
            problem = examples[name].problem
            assert not ours.supports(problem.kind)
            with pytest.warns(UserWarning, match="cannot establish"):
                result = ours.solve(problem)
            assert result.status is UpStatus.UNSUPPORTED_PROBLEM and result.plan is None
            assert "does not support" in result.log_messages[0].message


def test_a_fractional_cost_is_unsupported_with_the_readers_reason() -> None:
    from fractions import Fraction

    from unified_planning.model.metrics import MinimizeActionCosts
    from unified_planning.test.examples import get_example_problems

    problem = get_example_problems()["basic"].problem.clone()
    problem.add_quality_metric(MinimizeActionCosts({problem.action("a"): Fraction(1, 2)}))
    with OneshotPlanner(name="portfolio") as ours:
        assert ours.supports(problem.kind)  # UP calls every cost real; whole ones are read
        result = ours.solve(problem)
    assert result.status is UpStatus.UNSUPPORTED_PROBLEM
    assert "expected a whole number" in result.log_messages[0].message


def test_bad_params_are_refused_when_the_engine_is_made() -> None:
    with pytest.raises(ValueError, match="budget_s"):
        OneshotPlanner(name="portfolio", params={"budget_s": 0})
    with pytest.raises(ValueError, match="objective"):
        OneshotPlanner(name="portfolio", params={"objective": "speed"})


def test_the_cost_metric_and_an_optimality_proof() -> None:
    from unified_planning.test.examples import get_example_problems

    problem = get_example_problems()["basic_with_costs"].problem
    with OneshotPlanner(name="portfolio") as ours:
        result = ours.solve(problem)
    assert result.status is UpStatus.SOLVED_OPTIMALLY, result.metrics
    assert result.metrics["cost_model"] == "task"
    with OneshotPlanner(name="fast-downward-opt") as optimal:
        reference = optimal.solve(problem)
    with PlanValidator(name="sequential_plan_validator") as validator:
        ours_checked, optimum = (validator.validate(problem, r.plan) for r in (result, reference))
    assert ours_checked.status is ValidationResultStatus.VALID
    assert list(ours_checked.metric_evaluations.values()) == list(optimum.metric_evaluations.values())
    assert float(result.metrics["cost"]) == float(next(iter(optimum.metric_evaluations.values())))


@pytest.mark.parametrize("domain", ["elevators-sat08-strips", "transport-sat08-strips"])
def test_costs_from_static_fluents_some_left_undefined(domain) -> None:
    """IPC's cost fluents, undefined for pairs no action can use: the plan's cost is what UP's validator
    evaluates under the problem's metric."""
    (problem_file,) = smallest_problems(domain, 1)
    problem = PDDLReader().parse_problem(str(IPC / domain / "domain.pddl"), str(problem_file))
    with OneshotPlanner(name="portfolio") as ours:
        assert ours.supports(problem.kind)
        result = ours.solve(problem, timeout=10)
    assert result.status in SOLVED, result.metrics
    with PlanValidator(name="sequential_plan_validator") as validator, PlanValidator(name="portfolio") as mine:
        validator.skip_checks = True  # its kind check refuses static cost fluents its simulator evaluates
        verdict, own = validator.validate(problem, result.plan), mine.validate(problem, result.plan)
    assert verdict.status is own.status is ValidationResultStatus.VALID
    assert [float(v) for v in verdict.metric_evaluations.values()] == [float(result.metrics["cost"])]
    assert own.metric_evaluations == verdict.metric_evaluations


def quiet_within(seconds: float, window: float = 0.5) -> bool:
    """Whether, within `seconds`, this process's descendants spend a `window` using almost no CPU."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        then = descendants()
        time.sleep(window)
        now = descendants()
        if all(cpu - then[pid][1] < 0.05 for pid, (_, cpu) in now.items() if pid in then):
            return True
    return False


@pytest.mark.serial
def test_timeout_is_honoured_and_nothing_is_left_running() -> None:
    problem = PDDLReader().parse_problem(str(IPC / "parking-sat11-strips" / "domain.pddl"), str(hardest_parking()))
    before = set(descendants())
    with OneshotPlanner(name="portfolio") as ours:
        start = time.monotonic()
        result = ours.solve(problem, timeout=1.0)
        elapsed = time.monotonic() - start
        # What stays between calls is warm workers: idle search processes, and translator and pyperplan workers
        # (the ones stopped at the deadline are replaced, and the new ones take a moment to start). A search or
        # translation left on parking would keep a core busy for seconds (its translation alone takes ~10 s).
        assert quiet_within(3.0), {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in descendants()}
    assert result.status is UpStatus.TIMEOUT, result.metrics
    assert elapsed < 1.5, elapsed
    assert poll(lambda: set(descendants()) - before, lambda left: not left, 5, every=0.1) == set()


def test_learned_costs_from_the_traces_param_change_the_plan(tmp_path) -> None:
    domain, instance = write_instance("tools", 1, 0, tmp_path)
    problem = PDDLReader().parse_problem(str(domain), str(instance))
    risky = "web-search(job1, competitors, web-basic)"
    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        record(store, "noop-warmup", (), ["success"] * 5, "seed")
    with OneshotPlanner(name="portfolio", params={"traces": str(store_path)}) as ours:
        before = ours.solve(problem)
    assert before.status in SOLVED and risky in [str(a) for a in before.plan.actions]

    with TraceStore(store_path) as store:
        failures = (["failure"] * 8 + ["success"] * 2) * 6
        record(store, "web-search", ("job1", "competitors", "web-basic"), failures, "bad-days")
        retrain(store)
    with OneshotPlanner(name="portfolio", params={"traces": str(store_path), "weight": 5.0}) as ours:
        after = ours.solve(problem)
    assert after.status is UpStatus.SOLVED_SATISFICING  # optimal under learned costs is not the metric's optimum
    assert risky not in [str(a) for a in after.plan.actions]
    assert 0 < float(after.metrics["success_probability"]) <= 1
    assert after.metrics["cost_model"].startswith("learned:")
    with PlanValidator(name="portfolio") as ours_validator, PlanValidator(name="sequential_plan_validator") as theirs:
        for result in (before, after):
            assert ours_validator.validate(problem, result.plan).status is ValidationResultStatus.VALID
            assert theirs.validate(problem, result.plan).status is ValidationResultStatus.VALID


def test_the_validator_rejects_a_bad_plan_with_the_reason() -> None:
    from unified_planning.test.examples import get_example_problems

    problem = get_example_problems()["basic"].problem
    plan = SequentialPlan([ActionInstance(problem.action("a"))] * 2)  # a needs not x, and a made x true
    with PlanValidator(name="portfolio") as validator:
        verdict = validator.validate(problem, plan)
        assert verdict.status is ValidationResultStatus.INVALID
        assert "step 2" in verdict.log_messages[0].message
        assert validator.validate(problem, SequentialPlan([])).status is ValidationResultStatus.INVALID


def test_planner_and_load_task_take_a_up_problem(planner) -> None:
    from unified_planning.test.examples import get_example_problems

    from domains.load import load_task

    problem = get_example_problems()["robot_loader"].problem
    task = load_task(problem)
    result = planner.plan(problem)
    assert result.solved and validate_plan(task, result.actions()).ok
    with pytest.raises(TypeError, match="task_from_up"):
        planner.plan("domain.pddl")
    with pytest.raises(TypeError, match="task_from_up"):
        load_task("domain.pddl")
