"""`AnytimePlanner(name="portfolio")` through UP's factory: a first plan, then strictly cheaper ones, each one UP's
validator accepts, under the task's costs or learned ones; the final result carries the cheapest; a problem
outside the kind gets a status; a timeout is honoured with nothing left running."""

from __future__ import annotations

import time
import warnings

import pytest
from support import IPC, descendants, example, hardest_parking, poll, record, smallest_problems
from unified_planning.engines import PlanGenerationResultStatus as UpStatus
from unified_planning.engines import ValidationResultStatus
from unified_planning.engines.mixins.anytime_planner import AnytimeGuarantee
from unified_planning.io import PDDLReader
from unified_planning.shortcuts import AnytimePlanner, PlanValidator

import portfolio.up  # noqa: F401  (registers the engines)
from domains.bundled import write_instance
from learning.retrain import retrain
from traces.store import TraceStore

FINAL = (UpStatus.SOLVED_SATISFICING, UpStatus.SOLVED_OPTIMALLY)
# examples/up_anytime.py's courier: four streets on foot (2 each) or one taxi ride (10). A search that weighs its
# estimate above the cost paid (eager weighted A*, w = 3) takes the taxi, the one-step plan; with walks cheaper in
# all, the optimum is the streets.
courier = example("up_anytime").courier


pytestmark = pytest.mark.usefixtures("quiet_up_credits")


def check_solutions(problem, results) -> list[float]:
    """The costs (UP's validator's) of the INTERMEDIATE plans, checked: each VALID and strictly cheaper than the
    one before; the final result is the last, a plan as cheap as the last intermediate one."""
    *intermediate, final = results
    assert all(r.status is UpStatus.INTERMEDIATE for r in intermediate), [r.status for r in results]
    assert final.status in FINAL, final.status
    costs = []
    with PlanValidator(name="sequential_plan_validator") as validator:
        validator.skip_checks = True  # its kind check refuses static cost fluents its simulator evaluates
        for result in [*intermediate, final]:
            verdict = validator.validate(problem, result.plan)
            assert verdict.status is ValidationResultStatus.VALID, result.plan
            costs.append(float(next(iter(verdict.metric_evaluations.values()))))
    assert costs[:-1] == sorted(set(costs[:-1]), reverse=True), costs  # strictly decreasing
    assert costs[-1] == costs[-2], costs
    assert [float(r.metrics["cost"]) for r in results] == costs
    return costs[:-1]


def test_it_is_an_anytime_planner_with_increasing_quality() -> None:
    with AnytimePlanner(name="portfolio") as planner:
        assert planner.is_anytime_planner()
        assert planner.ensures(AnytimeGuarantee.INCREASING_QUALITY)
        assert not planner.ensures(AnytimeGuarantee.OPTIMAL_PLANS)


def test_a_first_plan_then_a_cheaper_one_proved_optimal() -> None:
    problem = courier()
    with AnytimePlanner(name="portfolio") as planner:
        results = list(planner.get_solutions(problem, timeout=20))
    costs = check_solutions(problem, results)
    assert costs == [10.0, 8.0], costs  # the taxi, then the four walks
    assert results[-1].status is UpStatus.SOLVED_OPTIMALLY
    assert [a.action.name for a in results[-1].plan.actions] == ["walk"] * 4


@pytest.mark.parametrize("name", ["basic_with_costs", "locations_connected_cost_minimize"])
def test_ups_examples_with_costs(name) -> None:
    from unified_planning.test.examples import get_example_problems

    problem = get_example_problems()[name].problem
    with AnytimePlanner(name="portfolio") as planner, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # UP "cannot establish" support for costs it calls real; we read them
        results = list(planner.get_solutions(problem, timeout=20))
    check_solutions(problem, results)
    assert results[-1].status is UpStatus.SOLVED_OPTIMALLY  # small enough for the proof


def test_costs_from_an_ipc_domain_strictly_decrease() -> None:
    (problem_file,) = smallest_problems("elevators-sat08-strips", 1)
    problem = PDDLReader().parse_problem(str(IPC / "elevators-sat08-strips" / "domain.pddl"), str(problem_file))
    with AnytimePlanner(name="portfolio") as planner:
        results = list(planner.get_solutions(problem, timeout=10))
    check_solutions(problem, results)


def test_without_costs_the_first_plan_is_the_only_one() -> None:
    from unified_planning.test.examples import get_example_problems

    problem = get_example_problems()["robot_loader"].problem
    with AnytimePlanner(name="portfolio") as planner:
        results = list(planner.get_solutions(problem))
    assert [r.status for r in results] == [UpStatus.INTERMEDIATE, UpStatus.SOLVED_SATISFICING]
    assert results[0].plan == results[1].plan
    with PlanValidator(name="sequential_plan_validator") as validator:
        assert validator.validate(problem, results[1].plan).status is ValidationResultStatus.VALID


def test_under_learned_costs_the_plans_improve_in_learned_cost(tmp_path) -> None:
    # two report jobs: with one, the first plan the weighted search finds (the untried engine) is already the best
    domain, instance = write_instance("tools", 2, 0, tmp_path)
    problem = PDDLReader().parse_problem(str(domain), str(instance))
    store_path = tmp_path / "traces.db"
    with TraceStore(store_path) as store:
        failures = (["failure"] * 8 + ["success"] * 2) * 6
        record(store, "web-search", ("job1", "competitors", "web-basic"), failures, "bad-days")
        retrain(store)
    with AnytimePlanner(name="portfolio", params={"traces": str(store_path)}) as planner:
        results = list(planner.get_solutions(problem, timeout=20))
    *intermediate, final = results
    assert intermediate and all(r.status is UpStatus.INTERMEDIATE for r in intermediate)
    assert final.status is UpStatus.SOLVED_SATISFICING  # no proof counts under learned costs
    assert all(r.metrics["cost_model"].startswith("learned:") for r in results)
    learned = [float(r.metrics["learned_cost"]) for r in intermediate]
    # eager weighted A* first (a web search and an expert), then the anytime search finds the database route for
    # both jobs, cheaper under learned costs
    assert len(learned) >= 2 and learned == sorted(set(learned), reverse=True), learned
    assert "web-search(job1, competitors, web-basic)" not in [str(a) for a in final.plan.actions]
    with PlanValidator(name="sequential_plan_validator") as validator:
        for result in results:
            assert validator.validate(problem, result.plan).status is ValidationResultStatus.VALID


def test_a_problem_outside_the_kind_is_one_unsupported_result() -> None:
    from unified_planning.test.examples import get_example_problems

    problem = get_example_problems()["robot"].problem  # numeric fluents
    with AnytimePlanner(name="portfolio") as planner:
        with pytest.warns(UserWarning, match="cannot establish"):
            results = list(planner.get_solutions(problem))
    assert [r.status for r in results] == [UpStatus.UNSUPPORTED_PROBLEM]
    assert "does not support" in results[0].log_messages[0].message


@pytest.mark.serial
@pytest.mark.parametrize("costs", [False, True])
def test_timeout_is_honoured_and_nothing_is_left_running(costs) -> None:
    """Without costs: parking, which no first plan reaches in time (a TIMEOUT); with costs: an elevators task on
    which the improving search has not proved its plan optimal at the deadline (it takes more than 3 s)."""
    domain = "elevators-sat08-strips" if costs else "parking-sat11-strips"
    problem_file = max(smallest_problems(domain, 3)) if costs else hardest_parking()
    problem = PDDLReader().parse_problem(str(IPC / domain / "domain.pddl"), str(problem_file))
    timeout = 2.0 if costs else 1.0
    before = set(descendants())
    with AnytimePlanner(name="portfolio") as planner:
        start = time.monotonic()
        results = list(planner.get_solutions(problem, timeout=timeout))
        elapsed = time.monotonic() - start
    assert elapsed < timeout + 0.5, elapsed
    if costs:
        check_solutions(problem, results)
    else:
        assert [r.status for r in results] == [UpStatus.TIMEOUT]
    assert poll(lambda: set(descendants()) - before, lambda left: not left, 5, every=0.1) == set()
