"""The warm translator worker is Fast Downward's translate pipeline: same SAS text as the driver's `--translate`,
task after task in one process, and unsolvability read from the translator's result.

The full comparison (one problem of every domain of the IPC benchmark sets) is
`benchmarks/experiments/sas_compare.py`; here a representative subset (committed in tests/data) runs through one warm
worker: ADL (quantifiers, conditional effects), derived predicates, action costs, plain STRIPS between them.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support import IPC, IPC_MORE

from portfolio.benchsuite.planners import driver_translate
from portfolio.benchsuite.suites import benchmark_pairs
from portfolio.delegates.fast_downward import translate as translate_worker
from portfolio.delegates.fast_downward.translate import TranslatorOptionsError, translate
from portfolio.engine.workers import WorkerProcess

SUBSET = [  # problem files, each beside its domain.pddl
    IPC_MORE / "miconic-fulladl" / "f1-0.pddl",  # ADL: forall, exists, when
    IPC_MORE / "philosophers" / "p01-phil2.pddl",  # derived predicates
    IPC / "blocks" / "probBLOCKS-4-0.pddl",
    IPC_MORE / "assembly" / "prob01.pddl",  # ADL
    IPC / "elevators-sat08-strips" / "p01.pddl",  # action costs
    IPC_MORE / "optical-telegraphs" / "p01-opt2.pddl",  # derived predicates
]


def test_warm_worker_sas_equals_the_drivers_translate_output() -> None:
    worker = WorkerProcess(preload=translate_worker.PRELOAD)
    try:
        for problem_path in SUBSET:
            domain_path = problem_path.parent / "domain.pddl"
            ours = worker.call(
                translate_worker.TRANSLATE_OP,
                time.monotonic() + 60,
                domain_pddl=domain_path.read_text(),
                problem_pddl=problem_path.read_text(),
            )
            theirs = driver_translate(domain_path, problem_path, timeout=60)
            assert theirs is not None, f"the driver did not translate {problem_path}"
            assert ours["sas"] == theirs, f"SAS differs from the driver's on {problem_path}"
            assert ours["unsolvable"] is False
    finally:
        worker.close()


UNREACHABLE_GOAL = (
    """(define (domain d) (:predicates (p) (q))
  (:action a :parameters () :precondition (p) :effect (q)))""",
    """(define (problem x) (:domain d) (:init) (:goal (q)))""",
)


def test_unsolvable_is_read_from_the_translators_result() -> None:
    result = translate(*UNREACHABLE_GOAL)
    assert result.unsolvable
    solvable = translate(UNREACHABLE_GOAL[0], UNREACHABLE_GOAL[1].replace("(:init)", "(:init (p))"))
    assert not solvable.unsolvable and "begin_operator" in solvable.sas


def test_goal_true_in_init_is_not_unsolvable() -> None:
    # The translator simplifies this to its trivially *solvable* task: no operators either, but the goal holds.
    result = translate(UNREACHABLE_GOAL[0], UNREACHABLE_GOAL[1].replace("(:init)", "(:init (q))"))
    assert not result.unsolvable


def test_translator_state_does_not_leak_between_tasks() -> None:
    from fast_downward.translate import main as translator
    from fast_downward.translate import options

    options.set_options(["d.pddl", "p.pddl", "--keep-unimportant-variables"])  # what a previous caller left
    translator.simplified_effect_condition_counter = 99
    problem = SUBSET[0]
    domain = problem.parent / "domain.pddl"
    result = translate(domain.read_text(), problem.read_text())
    assert options.options.filter_unimportant_vars is True
    assert f"\n{translator.simplified_effect_condition_counter} effect conditions simplified" in result.log
    assert result.sas == driver_translate(domain, problem, timeout=60)


MOVERS = (
    """(define (domain m) (:requirements :strips) (:predicates (at ?x ?l) (mobile ?x) (road ?a ?b))
  (:action move :parameters (?x ?a ?b) :precondition (and (mobile ?x) (at ?x ?a) (road ?a ?b))
   :effect (and (at ?x ?b) (not (at ?x ?a)))))""",
    """(define (problem p) (:domain m) (:objects t b l1 l2)
  (:init (mobile t) (at t l1) (at b l1) (road l1 l2) (road l2 l1)) (:goal (at t l2)))""",
)


def test_translator_options_apply_to_their_call_only() -> None:
    """`at(b, l1)` never changes (b is not mobile): the defaults prune it as unreachable-to-change, the flags
    keep it; the next call without flags is translated with the defaults again."""
    default = translate(*MOVERS)
    kept = translate(
        *MOVERS, ("--keep-unreachable-facts", "--skip-variable-reordering", "--keep-unimportant-variables")
    )
    assert default.sas.count("begin_variable") == 1 and kept.sas.count("begin_variable") == 2
    assert translate(*MOVERS).sas == default.sas
    assert translate(*MOVERS, ("--invariant-generation-max-time", "5")).sas == default.sas


@pytest.mark.parametrize(
    "options, message",
    [
        (("--sas-file", "x.sas"), "unsupported translator option '--sas-file'"),
        (("--relaxed",), "unsupported translator option"),
        (("--invariant-generation-max-time",), "needs a non-negative integer"),
        (("--invariant-generation-max-time", "-1"), "needs a non-negative integer"),
    ],
)
def test_options_outside_the_allow_list_are_refused(options, message) -> None:
    with pytest.raises(TranslatorOptionsError, match=message):
        translate(*MOVERS, options)


def test_translation_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    assert gc.isenabled()
    translate(*MOVERS)
    assert gc.isenabled()
    gc.disable()
    try:
        translate(*MOVERS)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_benchmark_pairs_reads_folders_and_pairs_files(tmp_path: Path) -> None:
    listed = [line for line in (IPC_MORE / "pairs.txt").read_text().splitlines() if line.strip()]
    pairs = benchmark_pairs(IPC_MORE / "pairs.txt", per_domain=5)
    domains = {label for label, _, _ in pairs}
    assert len(pairs) == len(listed) and domains == {line.split("/")[0] for line in listed}  # none has more than 5
    psr = [(d.name, p.name) for label, d, p in pairs if label == "psr-small"]
    assert psr == [("p01-domain.pddl", "p01-s2-n1-l2-f50.pddl"), ("p03-domain.pddl", "p03-s7-n1-l3-f70.pddl")]
    first = benchmark_pairs(IPC_MORE / "pairs.txt", per_domain=1)  # the first pair of each domain, in file order
    assert len(first) == len(domains) and [(d.name, p.name) for label, d, p in first if label == "psr-small"] == psr[:1]
    smallest = benchmark_pairs(IPC, per_domain=2)
    blocks = [p.stat().st_size for label, _, p in smallest if label == "blocks"]
    assert len(blocks) == 2 and blocks == sorted(blocks)
    bad = tmp_path / "pairs.txt"
    bad.write_text("only-one-path\n")
    with pytest.raises(ValueError, match="pairs.txt:1: expected 'DOMAIN PROBLEM'"):
        benchmark_pairs(bad)


def test_bench_coverage_takes_a_pairs_file(tmp_path: Path, capsys) -> None:
    import json

    from portfolio.cli import main

    pairs = tmp_path / "pairs.txt"
    blocks = IPC / "blocks"
    pairs.write_text(
        f"{blocks / 'domain.pddl'} {blocks / 'probBLOCKS-4-0.pddl'}\n"
        f"{blocks / 'domain.pddl'} {blocks / 'probBLOCKS-4-1.pddl'}\n"
    )
    assert main(["bench", "--ipc", str(pairs), "--coverage", "--budget", "5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["coverage"] == [{"domain": "blocks", "tasks": 2, "planner": 2, "driver": 2, "invalid": 0, "late": 0}]
    assert main(["bench", "--ipc", str(pairs)]) == 2  # a pairs file has no latency instances
    assert "only works with --coverage" in capsys.readouterr().err
