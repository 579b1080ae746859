"""Bundled domains and their generators: every generated problem parses, is deterministic per seed and is
solvable. Solvability is shown by a plan the validator accepts: found by a tiny greedy search over the
validator's own simulator for small sizes, and built by hand from the generated facts for large ones."""

from __future__ import annotations

import heapq
from itertools import count, product

import pytest

from domains.bundled import BUNDLED, bundled_task, domain_text, generate_problem, write_instance
from domains.model import GroundAction, Task, plan_cost
from domains.pddl import parse_task
from domains.validate import applicable, apply, unmet_goals, validate_plan


def ground_actions(task: Task) -> list[GroundAction]:
    """Every well-typed grounding of every schema (fine for the small sizes searched here)."""
    out = []
    for schema in task.domain.actions:
        domains = [task.objects_of_type(p.type) for p in schema.parameters]
        out += [GroundAction(schema.name, args) for args in product(*domains)]
    return out


def greedy_search(task: Task, limit: int = 50_000) -> list[GroundAction] | None:
    """Greedy best-first search on the number of unmet goals: a test helper, not a planner."""
    actions = ground_actions(task)
    start = task.problem.init
    tie = count()
    frontier = [(len(unmet_goals(task, start)), next(tie), start)]
    parent: dict = {start: None}
    while frontier and len(parent) < limit:
        h, _, state = heapq.heappop(frontier)
        if h == 0:
            plan = []
            while parent[state] is not None:
                state, step = parent[state]
                plan.append(step)
            return plan[::-1]
        for action in actions:
            if applicable(task, state, action):
                successor = apply(task, state, action)
                if successor not in parent:
                    parent[successor] = (state, action)
                    heapq.heappush(frontier, (len(unmet_goals(task, successor)), next(tie), successor))
    return None


def test_domains_parse_with_the_promised_costs() -> None:
    assert BUNDLED == ("blocksworld", "gripper", "logistics", "tools")
    costs = {name: parse_task(domain_text(name), generate_problem(name, 2)).has_action_costs() for name in BUNDLED}
    assert costs == {"blocksworld": False, "gripper": False, "logistics": True, "tools": True}


@pytest.mark.parametrize("name", BUNDLED)
def test_generation_is_deterministic_and_seeded(name: str) -> None:
    assert generate_problem(name, 6, seed=3) == generate_problem(name, 6, seed=3)
    assert len({generate_problem(name, 6, seed=s) for s in range(5)}) > 1


@pytest.mark.parametrize("name", BUNDLED)
def test_sizes_1_to_50_parse_with_size_many_main_objects(name: str) -> None:
    main_type = {"blocksworld": "block", "gripper": "ball", "logistics": "package", "tools": "job"}[name]
    for size in range(1, 51):
        task = bundled_task(name, size, seed=size)
        assert len(task.objects_of_type(main_type)) == size
        assert task.problem.minimize_total_cost == (name in ("logistics", "tools"))


@pytest.mark.parametrize(
    "name, sizes",
    [("blocksworld", (1, 2, 3, 4)), ("gripper", (1, 2, 3, 4)), ("logistics", (1, 2, 3)), ("tools", (1, 2, 3))],
)
def test_small_problems_are_solvable(name: str, sizes: tuple[int, ...]) -> None:
    for size, seed in product(sizes, range(3)):
        task = bundled_task(name, size, seed)
        plan = greedy_search(task)
        assert plan is not None, f"{name} size {size} seed {seed}: no plan found"
        result = validate_plan(task, plan)
        assert result.ok, result.message
        assert result.cost == plan_cost(task, plan)


def facts(task: Task, predicate: str) -> list[tuple[str, ...]]:
    return sorted(a.args for a in task.problem.init if a.predicate == predicate)


def test_large_blocksworld_solvable_by_unstack_and_rebuild() -> None:
    task = bundled_task("blocksworld", 50, seed=7)
    on = dict(facts(task, "on"))  # upper -> lower
    plan: list[GroundAction] = []
    for block in sorted(b for (b,) in facts(task, "clear")):
        while block in on:  # take the tower down from the top
            plan += [GroundAction("unstack", (block, on[block])), GroundAction("put-down", (block,))]
            block = on[block]
    goal_on = {a.args[0]: a.args[1] for a in task.problem.goal.parts if a.predicate == "on"}
    goal_above = {lower: upper for upper, lower in goal_on.items()}
    for (bottom,) in (a.args for a in task.problem.goal.parts if a.predicate == "ontable"):
        block = bottom
        while block in goal_above:
            plan += [GroundAction("pick-up", (goal_above[block],)), GroundAction("stack", (goal_above[block], block))]
            block = goal_above[block]
    result = validate_plan(task, plan)
    assert result.ok, result.message


def test_large_gripper_solvable_one_ball_at_a_time() -> None:
    task = bundled_task("gripper", 50, seed=2)
    robot = next(a.args[0] for a in task.problem.init if a.predicate == "at-robby")
    start = {b: r for b, r in facts(task, "at")}
    plan = []
    for goal in task.problem.goal.parts:
        ball, target = goal.args
        for step in (
            ("move", (robot, start[ball])),
            ("pick", (ball, start[ball], "left")),
            ("move", (start[ball], target)),
            ("drop", (ball, target, "left")),
        ):
            plan.append(GroundAction(*step))
        robot = target
    result = validate_plan(task, plan)
    assert result.ok, result.message
    assert result.cost == len(plan)


def test_large_logistics_solvable_via_truck_plane_truck() -> None:
    task = bundled_task("logistics", 50, seed=5)
    city_of = dict(facts(task, "in-city"))
    airport_of = {city: loc for loc, city in city_of.items() if loc in task.objects_of_type("airport")}
    truck_of = {}
    at = {}
    for obj, loc in facts(task, "at"):
        at[obj] = loc
        if obj in task.objects_of_type("truck"):
            truck_of[city_of[loc]] = obj
    plane = task.objects_of_type("airplane")[0]
    plan: list[GroundAction] = []

    def drive(city: str, to: str) -> None:
        truck = truck_of[city]
        if at[truck] != to:
            plan.append(GroundAction("drive-truck", (truck, at[truck], to, city)))
            at[truck] = to

    def truck_leg(package: str, frm: str, to: str) -> None:
        city = city_of[frm]
        drive(city, frm)
        plan.append(GroundAction("load-truck", (package, truck_of[city], frm)))
        drive(city, to)
        plan.append(GroundAction("unload-truck", (package, truck_of[city], to)))

    for goal in task.problem.goal.parts:
        package, target = goal.args
        here = at[package]
        if city_of[here] != city_of[target]:
            if here != airport_of[city_of[here]]:
                truck_leg(package, here, airport_of[city_of[here]])
                here = airport_of[city_of[here]]
            if at[plane] != here:
                plan.append(GroundAction("fly-airplane", (plane, at[plane], here)))
            plan.append(GroundAction("load-airplane", (package, plane, here)))
            plan.append(GroundAction("fly-airplane", (plane, here, airport_of[city_of[target]])))
            here = at[plane] = airport_of[city_of[target]]
            plan.append(GroundAction("unload-airplane", (package, plane, here)))
        if here != target:
            truck_leg(package, here, target)
    result = validate_plan(task, plan)
    assert result.ok, result.message
    flights = sum(1 for step in plan if step.name == "fly-airplane")
    drives = sum(1 for step in plan if step.name == "drive-truck")
    assert result.cost == 5 * flights + 2 * drives + (len(plan) - flights - drives)


def tools_routes(task: Task, job: str) -> dict[str, list[GroundAction]]:
    """One plan per kind of tool for `job`: the alternatives the domain promises."""
    topic = next(t for j, t in facts(task, "about") if j == job)
    database = next(d for d, t in facts(task, "indexes") if t == topic)
    expert = next(e for e, t in facts(task, "knows") if t == topic)
    write = GroundAction("write-report", (job, "writer-small"))
    return {
        "web": [GroundAction("web-search", (job, topic, "web-basic")), GroundAction("fact-check", (job,)), write],
        "web-pro": [GroundAction("web-search", (job, topic, "web-pro")), GroundAction("fact-check", (job,)), write],
        "database": [
            GroundAction("connect-database", (database,)),
            GroundAction("query-database", (job, topic, database)),
            write,
        ],
        "expert": [GroundAction("ask-expert", (job, topic, expert)), write],
    }


@pytest.mark.parametrize("seed", range(5))
def test_tools_every_job_has_distinct_routes_with_different_costs(seed: int) -> None:
    task = bundled_task("tools", 1, seed)
    (job,) = task.objects_of_type("job")
    costs = {}
    for route, plan in tools_routes(task, job).items():
        result = validate_plan(task, plan)
        assert result.ok, f"{route}: {result.message}"
        costs[route] = result.cost
    assert costs["web"] == 1 + 2 + 1 < costs["web-pro"] == 3 + 2 + 1
    assert costs["web"] < costs["database"] < costs["expert"]
    # without fact-checking, web notes cannot be written up: the routes really differ in what they need
    bad = validate_plan(
        task,
        [
            GroundAction("web-search", (job, tools_routes(task, job)["web"][0].args[1], "web-basic")),
            GroundAction("write-report", (job, "writer-small")),
        ],
    )
    assert (bad.failed_step, bad.missing) == (2, [f"(verified {job})"])


def test_large_tools_solvable_by_every_route_kind() -> None:
    task = bundled_task("tools", 50, seed=1)
    for kind in ("web", "database", "expert"):
        plan = [step for job in task.objects_of_type("job") for step in tools_routes(task, job)[kind]]
        result = validate_plan(task, plan)
        assert result.ok, f"{kind}: {result.message}"


def test_write_instance_round_trips(tmp_path) -> None:
    domain_path, problem_path = write_instance("logistics", 4, 9, tmp_path / "out")
    assert domain_path.read_text() == domain_text("logistics")
    assert problem_path.read_text() == generate_problem("logistics", 4, 9)
    assert parse_task(domain_path.read_text(), problem_path.read_text()) == bundled_task("logistics", 4, 9)


@pytest.mark.parametrize(
    "args, message",
    [
        (("chess", 3), "unknown bundled domain 'chess'; expected one of: blocksworld, gripper, logistics, tools"),
        (("gripper", 0), "size must be a whole number >= 1, got 0"),
    ],
)
def test_bad_arguments_get_precise_errors(args: tuple, message: str) -> None:
    with pytest.raises(ValueError) as error:
        generate_problem(*args)
    assert str(error.value) == message


def test_generate_into_a_file_says_out_must_be_a_folder(tmp_path, capsys):
    """`portfolio generate --out FILE` used to print Python's bare `[Errno 17] File exists: 'FILE'`."""
    from portfolio.cli import main

    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    assert main(["generate", "tools", "--size", "2", "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert f"--out {taken}: cannot write the domain and problem there (File exists); expected a folder" in err
    assert taken.read_text() == "{}"
