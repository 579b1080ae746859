"""Why a task has no plan (`domains.explain`): the goal atoms no plan can reach, traced back to a fact no action
adds and the initial state lacks, on a few shapes (a missing door, a missing action, a missing fact about an
object), none where the relaxation reaches every goal atom; through the CLI, the Planner and the service."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from support import REPO, portfolio

from domains.explain import explain_unreachable, reachable_atoms
from domains.model import Atom
from domains.pddl import parse_task

ROOMS = (REPO / "domains/examples/rooms/domain.pddl").read_text()


def rooms(init: str, goal: str, extra_objects: str = "") -> str:
    return f"""(define (problem p) (:domain rooms)
  (:objects a b c {extra_objects} - room r1 - robot)
  (:init {init})
  (:goal {goal}))
"""


def test_a_room_with_no_door_to_it_is_traced_back_to_the_missing_door():
    task = parse_task(ROOMS, rooms("(at r1 a) (door a b) (door b a)", "(and (lit b) (lit c))"))
    [line] = explain_unreachable(task)
    assert line.startswith("(lit c) cannot be reached: only light adds lit")
    assert line.endswith("(door ?from c), which no action adds and the initial state holds for no ?from")
    assert Atom("lit", ("b",)) in reachable_atoms(task)  # b is lit through the door; only c is named


def test_a_predicate_no_action_adds_and_the_initial_state_lacks():
    domain = ROOMS.replace("(lit ?r - room))", "(lit ?r - room) (painted ?r - room))")
    task = parse_task(domain, rooms("(at r1 a)", "(and (lit a) (painted a))"))
    assert explain_unreachable(task) == [
        "(painted a) cannot be reached: (painted a), which no action adds and the initial state holds not"
    ]


def test_a_robot_nowhere_is_the_fact_that_is_missing():
    task = parse_task(ROOMS, rooms("(door a b)", "(lit a)"))
    [line] = explain_unreachable(task)
    assert "light ?r=a needs (at ?rob a)" in line
    assert line.endswith(
        "move ?to=a needs (at ?rob ?from), which the initial state holds for no ?from, ?rob and only move adds at, "
        "from itself"
    )


def test_nothing_to_say_when_the_relaxation_reaches_every_goal_atom():
    # unsolvable only through deletes: the robot must be in two rooms at once; a negative goal is not traced
    task = parse_task(ROOMS, rooms("(at r1 a) (door a b) (door b a)", "(and (at r1 a) (at r1 b))"))
    assert explain_unreachable(task) == []
    task = parse_task(ROOMS, rooms("(at r1 a) (lit a)", "(not (lit a))"))
    assert explain_unreachable(task) == []


def test_a_task_too_large_to_explore_gets_no_explanation():
    task = parse_task(ROOMS, rooms("(at r1 a) (door a b) (door b a)", "(lit c)"))
    assert explain_unreachable(task, limit=1) == []
    assert explain_unreachable(task) != []


def test_the_cli_and_the_planner_say_it(tmp_path: Path):
    from portfolio.planner import Planner

    domain, problem = REPO / "domains/examples/rooms/domain.pddl", REPO / "domains/examples/rooms/dark-c.pddl"
    out = portfolio("plan", domain, problem, "--json")
    answer = json.loads(out.stdout)
    assert out.returncode == 1 and answer["status"] == "unsolvable"
    assert [line.split(":")[0] for line in answer["explanation"]] == ["(lit c) cannot be reached"]
    with Planner() as planner:
        result = planner.plan(parse_task(domain.read_text(), problem.read_text()))
    assert result.explanation == answer["explanation"]


def test_the_service_answers_with_the_explanation():
    from test_service_helpers import config, serve_in_thread

    body = {"domain": ROOMS, "problem": (REPO / "domains/examples/rooms/dark-c.pddl").read_text()}
    with serve_in_thread(config()) as (url, _):
        answer = httpx.post(url + "/v1/plan", json=body, timeout=60).json()
    assert answer["status"] == "unsolvable" and answer["explanation"][0].startswith("(lit c) cannot be reached")
