"""`portfolio validate DOMAIN PROBLEM PLAN`: exit 0 valid, 1 invalid with the critique, 2 bad input."""

from __future__ import annotations

import json

import pytest
from support import IPC

from portfolio.cli import main

DOMAIN = str(IPC / "blocks" / "domain.pddl")
PROBLEM = str(IPC / "blocks" / "probBLOCKS-4-0.pddl")
GOOD = ["(pick-up b)", "(stack b a)", "(pick-up c)", "(stack c b)", "(pick-up d)", "(stack d c)"]


def plan_file(tmp_path, lines) -> str:
    path = tmp_path / "plan.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_valid_plan_exits_0_and_reads_the_plan_commands_own_output(tmp_path, capsys):
    assert main(["plan", DOMAIN, PROBLEM]) == 0
    printed = capsys.readouterr().out  # actions, then `;` comment lines
    assert main(["validate", DOMAIN, PROBLEM, plan_file(tmp_path, printed.splitlines())]) == 0
    assert capsys.readouterr().out.startswith("valid: ")


def test_an_invalid_plan_exits_1_with_the_step_and_the_missing_literals(tmp_path, capsys):
    path = plan_file(tmp_path, ["; an LLM's attempt", "(pick-up b)", "pick-up c"])
    assert main(["validate", DOMAIN, PROBLEM, path, "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["valid"] is False and verdict["failed_step"] == 2 and verdict["problem"] == "precondition"
    assert "(handempty)" in verdict["missing"]
    assert main(["validate", DOMAIN, PROBLEM, plan_file(tmp_path, GOOD[:3])]) == 1
    assert "goal not reached after 3 steps" in capsys.readouterr().out
    assert main(["validate", DOMAIN, PROBLEM, plan_file(tmp_path, ["(fly b)"])]) == 1
    assert "unknown" in capsys.readouterr().out


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda tmp: [DOMAIN, PROBLEM, str(tmp / "missing.txt")], "file not found"),
        (lambda tmp: [DOMAIN, str(tmp / "nope.pddl"), plan_file(tmp, GOOD)], "file not found"),
        (
            lambda tmp: [DOMAIN, PROBLEM, plan_file(tmp, ["(pick-up b", "(stack b a)"])],
            "plan.txt:1: expected one action",
        ),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, make_args, message):
    assert main(["validate", *make_args(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
