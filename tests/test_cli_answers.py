"""Small CLI answers, as a user runs them (real processes): `plan --json` answers bad input
on stdout too; `validate` takes a JSON task (`--task`) and numbered plan lines, and names file:line for a bad
one."""

from __future__ import annotations

import json
import subprocess
import sys

from support import IPC, REPO, portfolio

from domains.ground_text import parse_ground_action
from domains.json_task import task_from_json
from domains.validate import validate_plan

BLOCKS_DOMAIN = IPC / "blocks" / "domain.pddl"
BLOCKS_4 = IPC / "blocks" / "probBLOCKS-4-0.pddl"
JSON_TASK = REPO / "domains" / "examples" / "blocks-task.json"


def test_plan_json_answers_bad_input_on_stdout(tmp_path):
    bad = tmp_path / "domain.pddl"
    bad.write_text("(define (domain")
    run = portfolio("plan", bad, BLOCKS_4, "--json")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    answer = json.loads(run.stdout)
    assert answer["kind"] == "PDDLSyntaxError" and answer["error"].startswith(f"{bad}:1:")
    assert answer["error"] in run.stderr  # and the message on stderr, as without --json
    usage = portfolio("plan", BLOCKS_DOMAIN, "--json")
    assert usage.returncode == 2 and json.loads(usage.stdout)["error"].startswith("a PROBLEM file is needed")


def test_validate_takes_a_json_task(tmp_path):
    planned = portfolio("plan", "--task", JSON_TASK)
    assert planned.returncode == 0, planned.stderr
    plan = tmp_path / "plan.txt"
    plan.write_text(planned.stdout)
    task = task_from_json(JSON_TASK.read_text(), str(JSON_TASK))
    steps = [parse_ground_action(line) for line in planned.stdout.splitlines() if line.startswith("(")]
    assert validate_plan(task, steps).ok
    run = portfolio("validate", "--task", JSON_TASK, plan, "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["valid"] is True, run.stderr
    wrong = portfolio("validate", "--task", JSON_TASK, BLOCKS_DOMAIN, plan)
    assert wrong.returncode == 2 and "give DOMAIN PROBLEM PLAN, or --task FILE PLAN" in wrong.stderr


def test_validate_reads_numbered_plan_lines_and_names_the_line_of_a_bad_one(tmp_path):
    planned = portfolio("plan", BLOCKS_DOMAIN, BLOCKS_4, "--delegates", "fast-downward,pyperplan")
    steps = [line for line in planned.stdout.splitlines() if line.startswith("(")]
    numbered = tmp_path / "numbered.txt"
    numbered.write_text("".join(f"{i}: {s}\n" for i, s in enumerate(steps)))  # as an LLM writes it
    ipc = tmp_path / "ipc.txt"
    ipc.write_text("".join(f"{i}.000: {s} [1.000]\n" for i, s in enumerate(steps)))  # IPC's timed format
    for path in (numbered, ipc):
        run = portfolio("validate", BLOCKS_DOMAIN, BLOCKS_4, path)
        assert run.returncode == 0 and run.stdout.startswith(f"valid: {len(steps)} steps"), run.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{steps[0]}\n1: pick up (b\n")
    run = portfolio("validate", BLOCKS_DOMAIN, BLOCKS_4, bad)
    assert run.returncode == 2 and f"{bad}:2: expected one action like (pick-up a)" in run.stderr, run.stderr
    glued = tmp_path / "glued.txt"
    glued.write_text("(pick-up b) extra\n")
    run = portfolio("validate", BLOCKS_DOMAIN, BLOCKS_4, glued)
    assert run.returncode == 2 and f"{glued}:1:" in run.stderr, run.stderr


def test_bench_latency_takes_one_domain_folder_as_bench_run_does(tmp_path):
    """A domain folder with one problem not in the latency table: that problem is timed (cold start included)."""
    folder = tmp_path / "tiny-blocks"
    folder.mkdir()
    (folder / "domain.pddl").write_text(BLOCKS_DOMAIN.read_text())
    (folder / "p1.pddl").write_text(BLOCKS_4.read_text())
    run = portfolio("bench", "latency", "--ipc", folder, "--rounds", "1", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [row["instance"] for row in report["latency"]] == ["tiny-blocks/p1.pddl"]
    assert report["latency"][0]["first_plan_ms"] > 0 and report["cold_start_s"] > 0
    empty = portfolio("bench", "latency", "--ipc", tmp_path, "--rounds", "1")
    assert empty.returncode == 2 and "nor a domain folder" in empty.stderr


def test_top_level_help_states_the_default_cascade_and_its_budgets():
    """`portfolio --help` once said "Fast Downward, then pyperplan, in 1 s" while the default cascade goes on to
    the goal agenda for 30 s: the sentence must name every default delegate and both default budgets."""
    import argparse

    from portfolio.commands import plan_cmd
    from portfolio.delegates.registry import DEFAULT_DELEGATES

    sub = argparse.ArgumentParser().add_subparsers()
    plan_cmd.register(sub)
    defaults = sub.choices["plan"].parse_args([])
    run = portfolio("--help")
    assert run.returncode == 0
    line = " ".join(
        run.stdout.split("portfolio plan domain.pddl problem.pddl", 1)[1].split("portfolio plan")[0].split()
    )
    assert DEFAULT_DELEGATES == ("fast-downward", "pyperplan", "goal-agenda")
    assert line.index("Fast Downward") < line.index("pyperplan") < line.index("goal agenda"), line
    assert f"in {defaults.budget:g} s" in line and f"{defaults.decomposer_budget:g} s" in line, line


SCENARIO = """
from dataclasses import dataclass
from domains.typed_actions import action

@dataclass
class Trip:
    to: str

@dataclass
class Booking:
    ref: str

def actions():
    @action(goal=True)
    def book(trip: Trip) -> Booking:
        return Booking("B-1")
    return [book]

def needs_an_argument(city):
    return actions()
"""


def test_the_typed_module_factory_contract_is_documented_and_held(tmp_path):
    """`bench run typed:MODULE:FACTORY`: --help says what MODULE and FACTORY must be; a user's scenario runs; a
    factory that breaks the contract is exit 2 with the contract, not a traceback."""
    (tmp_path / "trip_scenario.py").write_text(SCENARIO)
    env_path = f"{REPO}:{tmp_path}"

    def bench(*args) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "portfolio.cli", "bench", "run", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env={"PYTHONPATH": env_path},
        )

    helped = " ".join(bench("--help").stdout.split())
    assert "FACTORY a function without arguments returning a list of @action functions" in helped
    assert "MODULE importable (on PYTHONPATH" in helped
    out = tmp_path / "out"
    run = bench("typed:trip_scenario:actions", "--planners", "typed-search", "--out", out)
    assert run.returncode == 0, run.stderr
    [line] = (out / "runs.jsonl").read_text().splitlines()
    assert json.loads(line)["status"] == "solved" and json.loads(line)["valid"] is True
    broken = bench("typed:trip_scenario:needs_an_argument", "--planners", "typed-search", "--out", tmp_path / "o2")
    assert broken.returncode == 2 and "Traceback" not in broken.stderr, broken.stderr
    assert "needs_an_argument() failed (TypeError" in broken.stderr and "without arguments" in broken.stderr
