"""`portfolio bench run`'s suites and planner names: what they read, and the precise errors for bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import IPC, IPC_MORE, smallest_problems

from domains.validate import validate_plan
from portfolio.benchsuite import suites
from portfolio.benchsuite.planners import PlannerError, cascade_names, hard_budget_s, parse_planners
from portfolio.cli import main


def test_folder_of_domains_keeps_the_smallest_problems_of_each():
    specs = suites.read_suite(str(IPC), per_domain=2)
    domains = sorted(p.name for p in IPC.iterdir() if (p / "domain.pddl").exists())
    assert sorted({s.domain for s in specs}) == domains
    blocks = [Path(s.problem_file).name for s in specs if s.domain == "blocks"]
    assert blocks == [p.name for p in smallest_problems("blocks", 2)]
    assert all(Path(s.domain_file).is_absolute() and Path(s.problem_file).is_file() for s in specs)


def test_one_domain_folder_is_a_suite_too():
    specs = suites.read_suite(str(IPC / "gripper"))
    assert len(specs) == len(list((IPC / "gripper").glob("prob*.pddl")))
    assert {s.domain for s in specs} == {"gripper"}


def test_pairs_file_resolves_paths_against_its_folder():
    specs = suites.read_suite(str(IPC_MORE / "pairs.txt"))
    lines = [x for x in (IPC_MORE / "pairs.txt").read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert len(specs) == len(lines)
    psr = next(s for s in specs if s.domain == "psr-small")
    assert Path(psr.domain_file).name.endswith("domain.pddl") and Path(psr.domain_file).parent.name == "psr-small"
    assert len(suites.read_suite(str(IPC_MORE / "pairs.txt"), per_domain=1)) == len({s.domain for s in specs})


def test_bad_pairs_lines_name_file_and_line(tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"# comment\n{IPC}/blocks/domain.pddl {IPC}/blocks/probBLOCKS-4-0.pddl\nonly-one-field\n")
    with pytest.raises(suites.SuiteError, match=r"pairs.txt:3: expected 'DOMAIN PROBLEM'"):
        suites.read_suite(str(pairs))
    pairs.write_text("domain.pddl missing.pddl\n")
    with pytest.raises(suites.SuiteError, match=r"pairs.txt:1: no such file"):
        suites.read_suite(str(pairs))


def test_generator_sweep_sizes_and_seeds():
    specs = suites.read_suite("gen:logistics:sizes=2..4:seeds=0,3")
    assert [(s.size, s.seed) for s in specs] == [(2, 0), (2, 3), (3, 0), (3, 3), (4, 0), (4, 3)]
    task = suites.load(specs[-1])
    assert len([o for o, t in task.problem.objects if t == "package"]) == 4


@pytest.mark.parametrize("text, message", [
    ("gen:nosuch:sizes=1..2", "NAME one of"),
    ("gen:gripper", "expected gen:NAME"),
    ("gen:gripper:sizes=a..b", "sizes must be A..B"),
    ("gen:gripper:sizes=0..2", "sizes must be >= 1"),
    ("gen:gripper:size=2", "unknown option"),
    ("typed:nosuch.module:f", "typed scenario nosuch.module:f"),
    ("typed:research2", "expected typed:research"),
    ("/no/such/folder", "not a folder, a pairs file"),
])  # fmt: skip
def test_bad_suites_are_clear_errors(text, message):
    with pytest.raises(suites.SuiteError, match=message):
        suites.read_suite(text)


def test_typed_scenario_starts_from_inputs_no_action_produces():
    (spec,) = suites.read_suite("typed:research")
    task = suites.load(spec)
    assert {a.predicate for a in task.problem.init} == {"known-request"}
    from domains.ground_text import parse_ground_action

    plan = [parse_ground_action(s) for s in ("(find-person)", "(fetch-wire)", "(write-up)")]
    assert validate_plan(task, plan).ok


def test_latency_suite_is_the_old_tables_instances():
    from portfolio.benchsuite.suites import LATENCY_INSTANCES

    specs = suites.read_suite("latency", ipc=IPC)
    assert len(specs) == sum(len(v) for v in LATENCY_INSTANCES.values())
    with pytest.raises(suites.SuiteError, match="pass --ipc"):
        suites.read_suite("latency", ipc=Path("/nonexistent"))


def test_suites_are_concatenated_without_duplicates():
    specs = suites.read_suites(["gen:gripper:sizes=1..3", "gen:gripper:sizes=2..5"])
    assert [s.size for s in specs] == [1, 2, 3, 4, 5]


def test_planner_names():
    assert parse_planners("cascade, driver:lama-first,typed-search,cascade:typed-search+fast-downward") == [
        "cascade",
        "driver:lama-first",
        "typed-search",
        "cascade:typed-search+fast-downward",
    ]
    assert cascade_names("classical") == ("fast-downward", "pyperplan")
    assert hard_budget_s("cascade", 1.0, 30.0) == 31.0 and hard_budget_s("classical", 1.0, 30.0) == 1.0
    for bad, message in (
        ("nope", "unknown planner 'nope'"),
        ("cascade:fast-downward+nope", "unknown delegate nope"),
        ("cascade,cascade", "twice"),
        ("", "empty"),
        ("driver:LAMA FIRST", "driver:ALIAS"),
    ):
        with pytest.raises(PlannerError, match=message):
            parse_planners(bad)


def test_cli_bad_input_exits_2_with_one_line(capsys, tmp_path):
    cases = [
        ["bench", "run", "gen:gripper:sizes=x", "--planners", "cascade", "--out", str(tmp_path)],
        ["bench", "run", "gen:gripper:sizes=2", "--planners", "nope", "--out", str(tmp_path)],
        ["bench", "run", "gen:gripper:sizes=2", "--planners", "cascade", "--budget", "0", "--out", str(tmp_path)],
        # inf used to run, every run an error, and write `"budget_s": Infinity` (not JSON) into runs.jsonl
        ["bench", "run", "gen:gripper:sizes=2", "--planners", "cascade", "--budget", "inf", "--out", str(tmp_path)],
        ["bench", "run", "gen:gripper:sizes=2", "--planners", "cascade", "--setup-timeout", "inf"]
        + ["--out", str(tmp_path)],
        ["bench", "run", "gen:gripper:sizes=2", "--planners", "cascade", "--repeat", "0", "--out", str(tmp_path)],
        ["bench", "report", str(tmp_path / "missing")],
        # `bench latency --rounds 0` ended in statistics' "no median for empty data" traceback; --budget 0 or inf
        # in Tier's ValueError traceback
        ["bench", "latency", "--ipc", str(IPC / "blocks"), "--rounds", "0"],
        ["bench", "latency", "--ipc", str(IPC / "blocks"), "--coverage", "--per-domain", "1", "--budget", "0"],
        ["bench", "latency", "--ipc", str(IPC / "blocks"), "--coverage", "--per-domain", "0"],
        ["bench", "report", str(tmp_path)],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("portfolio: error: ") and "Traceback" not in err, err


def test_old_flags_still_mean_the_latency_table():
    from portfolio.cli import build_parser
    from portfolio.commands import bench_cmd

    old = build_parser().parse_args(["bench", "--ipc", str(IPC), "--coverage", "--per-domain", "3"])
    new = build_parser().parse_args(["bench", "latency", "--ipc", str(IPC), "--coverage", "--per-domain", "3"])
    for args in (old, new):
        assert args.func is bench_cmd.run_latency
        assert (args.ipc, args.coverage, args.per_domain, args.budget, args.rounds) == (IPC, True, 3, 1.0, 7)
