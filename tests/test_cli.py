"""`portfolio plan` and `portfolio schema` as a user runs them: real processes, exit codes, messages."""

from __future__ import annotations

import json

import pytest
from support import IPC, hardest_parking, portfolio

from domains.load import load_task
from domains.validate import validate_plan

BLOCKS_DOMAIN = IPC / "blocks" / "domain.pddl"
BLOCKS_4 = IPC / "blocks" / "probBLOCKS-4-0.pddl"


def test_plain_output_is_a_valid_plan_file_with_cost_delegate_and_attempts(tmp_path):
    run = portfolio("plan", BLOCKS_DOMAIN, BLOCKS_4)
    assert run.returncode == 0, run.stderr
    actions = [line for line in run.stdout.splitlines() if line.startswith("(")]
    comments = [line for line in run.stdout.splitlines() if line.startswith(";")]
    assert len(actions) + len(comments) == len(run.stdout.splitlines())
    from domains.ground_text import parse_ground_action

    task = load_task(BLOCKS_DOMAIN, BLOCKS_4)
    assert validate_plan(task, [parse_ground_action(a) for a in actions]).ok
    assert f"; cost = {len(actions)}" in comments
    assert "; delegate = fast-downward" in comments
    assert any(c.startswith("; attempt fast-downward: solved in") for c in comments)


def test_json_output_is_a_plan_result():
    run = portfolio("plan", BLOCKS_DOMAIN, BLOCKS_4, "--json", "--delegates", "pyperplan", "--budget", "5")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "solved" and result["delegate"] == "pyperplan"
    assert all(step.startswith("(") and step.endswith(")") for step in result["plan"])
    assert result["attempts"][0]["delegate"] == "pyperplan"
    assert result["attempts"][0]["elapsed_ms"] > 0
    assert result["cost"] == len(result["plan"])


def test_json_task_file_is_planned():
    run = portfolio("plan", "--task", "domains/examples/blocks-task.json", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "solved"


def test_timeout_exits_1_and_says_out_of_time():
    problem = hardest_parking()
    run = portfolio(
        "plan", IPC / "parking-sat11-strips" / "domain.pddl", problem, "--delegates", "fast-downward,pyperplan"
    )
    assert run.returncode == 1
    assert "every delegate ran out of time" in run.stdout


def test_unsolvable_exits_1_and_says_unsolvable(tmp_path):
    problem = tmp_path / "impossible.pddl"
    problem.write_text("""(define (problem impossible) (:domain BLOCKS) (:objects a b)
      (:init (clear a) (clear b) (ontable a) (ontable b) (handempty)) (:goal (and (on a b) (on b a))))""")
    run = portfolio("plan", BLOCKS_DOMAIN, problem)
    assert run.returncode == 1
    assert "unsolvable" in run.stdout


def test_goal_that_already_holds_exits_0_with_the_empty_plan(tmp_path):
    problem = tmp_path / "done.pddl"
    problem.write_text("""(define (problem done) (:domain BLOCKS) (:objects a)
      (:init (clear a) (ontable a) (handempty)) (:goal (ontable a)))""")
    run = portfolio("plan", BLOCKS_DOMAIN, problem, "--json")
    assert run.returncode == 0
    assert json.loads(run.stdout)["plan"] == []


def _variant(tmp_path, old: str, new: str, name: str = "problem.pddl"):
    text = BLOCKS_4.read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


BAD_PROBLEMS = {
    "syntax": ("(:goal (AND (ON D C)", "(:goal (AND (ON D C))", "problem.pddl:7", "unexpected ')'"),
    "undefined predicate": ("(CLEAR C)", "(CLEER C)", "problem.pddl:4", "undefined predicate 'cleer'"),
    "unknown goal object": ("(ON D C)", "(ON D Z)", "problem.pddl:6", "unknown object 'z'"),
    "wrong arity": ("(ONTABLE C)", "(ONTABLE C D)", "problem.pddl:4", "expects 1 argument"),
    "undefined type": ("(:objects D B A C )", "(:objects D B A C - widget)", "problem.pddl:3", "widget"),
}


@pytest.mark.parametrize("kind", sorted(BAD_PROBLEMS))
def test_bad_problem_exits_2_with_file_line_and_no_traceback(tmp_path, kind):
    old, new, where, what = BAD_PROBLEMS[kind]
    run = portfolio("plan", BLOCKS_DOMAIN, _variant(tmp_path, old, new))
    assert run.returncode == 2
    assert where in run.stderr and what in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout == ""


def test_bad_domain_reports_the_domain_file(tmp_path):
    domain = tmp_path / "domain.pddl"
    domain.write_text(BLOCKS_DOMAIN.read_text().replace("(holding ?x)", "(holds ?x)", 1))
    run = portfolio("plan", domain, BLOCKS_4)
    assert run.returncode == 2
    assert "domain.pddl:21" in run.stderr and "undefined predicate 'holding'" in run.stderr
    assert "Traceback" not in run.stderr


def test_missing_file_exits_2():
    run = portfolio("plan", BLOCKS_DOMAIN, "no-such-problem.pddl")
    assert run.returncode == 2
    assert "file not found: no-such-problem.pddl" in run.stderr


def test_json_task_that_fails_the_schema_exits_2_naming_the_field(tmp_path):
    bad = tmp_path / "task.json"
    bad.write_text(json.dumps({"objects": 3, "predicates": [], "actions": [], "init": [], "goal": []}))
    run = portfolio("plan", "--task", bad)
    assert run.returncode == 2
    assert "objects" in run.stderr and "task.json" in run.stderr
    assert "Traceback" not in run.stderr


def test_usage_errors_exit_2():
    assert portfolio("plan").returncode == 2
    assert portfolio("plan", BLOCKS_DOMAIN).returncode == 2
    assert portfolio("plan", BLOCKS_DOMAIN, BLOCKS_4, "--delegates", "nonsense").returncode == 2


def test_schema_task_prints_a_json_schema():
    run = portfolio("schema", "task")
    assert run.returncode == 0
    schema = json.loads(run.stdout)
    assert {"objects", "actions", "init", "goal"} <= set(schema["properties"])


def test_help_teaches_exit_codes_and_examples():
    run = portfolio("plan", "--help")
    assert run.returncode == 0
    assert "exit codes" in run.stdout and "portfolio plan" in run.stdout


def test_plan_help_is_built_from_the_delegate_catalog():

    from portfolio.delegates.registry import CATALOG, DEFAULT_DELEGATES

    run = portfolio("plan", "--help", timeout=60, env={"COLUMNS": "2000"})  # no wrapping inside names
    text = " ".join(run.stdout.split())
    assert run.returncode == 0
    assert f"default: {','.join(DEFAULT_DELEGATES)}" in text
    for name, spec in CATALOG.items():
        assert f"{name}: {' '.join(spec.summary.split())}" in text
        assert f"{name}={spec.share:g}" in text
    assert "unsolvable (proved by a complete method)" in text and "incomplete" in text


def test_steps_no_goal_needs_are_removed_unless_asked_to_keep_them():
    """Fast Downward's lama-first plan for blocks 12-0 has 94 steps, 44 of which no goal needs."""
    problem = IPC / "blocks" / "probBLOCKS-12-0.pddl"
    task = load_task(BLOCKS_DOMAIN, problem)
    from domains.ground_text import parse_ground_action

    plans = {}
    for flag in ((), ("--keep-all-steps",)):
        run = portfolio(
            "plan",
            BLOCKS_DOMAIN,
            problem,
            "--json",
            "--delegates",
            "fast-downward",
            "--fd-workers",
            "1",
            "--budget",
            "10",
            *flag,
        )
        assert run.returncode == 0, run.stderr
        result = json.loads(run.stdout)
        plan = [parse_ground_action(step) for step in result["plan"]]
        assert validate_plan(task, plan).ok
        plans[flag] = (len(plan), result["eliminated_steps"])
    kept, reduced = plans[("--keep-all-steps",)], plans[()]
    assert kept[1] == 0 and reduced[1] > 0
    assert reduced[0] + reduced[1] == kept[0] and reduced[0] < kept[0]


@pytest.mark.parametrize("option", ["--budget", "--decomposer-budget"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_budget_that_is_not_a_finite_positive_number_is_a_usage_error(capsys, option, value):
    """`--budget inf` used to plan with a traceback (select() overflowed), `--budget -1` or `nan` silently left the
    classical tier no time, and `--decomposer-budget inf` made the goal agenda err: each is bad input, exit 2."""
    from portfolio.cli import main

    with pytest.raises(SystemExit) as exit:
        main(["plan", str(BLOCKS_DOMAIN), str(BLOCKS_4), option, value])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: expected a finite number of seconds > 0, got {value!r}" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("option", ["--budget", "--max-budget", "--decomposer-budget", "--validate-budget"])
def test_serve_refuses_an_infinite_budget(capsys, option):
    """`serve --budget inf` used to start and then lose every planner worker at birth, over and over (inf
    reached the workers' JSON configuration as null)."""
    from portfolio.cli import build_parser

    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(["serve", "--workers", "1", option, "inf"])
    assert exit.value.code == 2
    assert f"argument {option}: expected a finite number of seconds > 0" in capsys.readouterr().err
