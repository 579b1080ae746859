"""The on-disk translation cache: a second cold `portfolio plan` skips translation, corrupt entries are ignored
and rewritten, the size bound evicts the least recently used, and nothing touches the user's cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from support import IPC, portfolio

from domains.ground_text import parse_ground_action
from domains.load import load_task
from domains.validate import validate_plan
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.fast_downward.sas_cache import CachedTranslation, SasCache, cache_key, default_cache_dir
from portfolio.delegates.fast_downward.translate import TranslatorOptionsError
from portfolio.delegates.registry import build_stages
from portfolio.engine.results import PlanRequest, Status

DOMAIN = IPC / "blocks" / "domain.pddl"
PROBLEM = IPC / "blocks" / "probBLOCKS-4-0.pddl"


def plan_cli(*args, env=None) -> dict:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "portfolio.cli",
            "plan",
            str(DOMAIN),
            str(PROBLEM),
            "--json",
            "--delegates",
            "fast-downward",
            "--budget",
            "10",
            *map(str, args),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert validate_plan(load_task(DOMAIN, PROBLEM), [parse_ground_action(s) for s in result["plan"]]).ok
    return result


def translation(result: dict) -> str:
    return result["attempts"][-1]["details"]["translation"]


def test_a_second_cold_run_skips_translation_and_a_corrupt_entry_is_rewritten(tmp_path):
    cache = tmp_path / "cache"
    assert translation(plan_cli("--cache-dir", cache)) == "translated"
    entries = list(SasCache(cache).directory.glob("*.sas"))
    assert len(entries) == 1
    assert translation(plan_cli("--cache-dir", cache)) == "disk"  # a new process: nothing in memory

    entries[0].write_bytes(entries[0].read_bytes()[:-200])  # truncated, as by a crash mid-copy
    assert translation(plan_cli("--cache-dir", cache)) == "translated"
    assert translation(plan_cli("--cache-dir", cache)) == "disk"  # rewritten whole

    assert translation(plan_cli("--cache-dir", cache, "--no-cache")) == "translated"


def test_the_default_directory_follows_xdg_and_the_cli_uses_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "portfolio-planner"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == tmp_path.home() / ".cache" / "portfolio-planner"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    plan_cli(env=env)
    assert len(list(SasCache(tmp_path / "portfolio-planner").directory.glob("*.sas"))) == 1


def test_a_file_as_cache_dir_is_bad_input(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    run = portfolio("plan", DOMAIN, PROBLEM, "--cache-dir", file, timeout=60)
    assert run.returncode == 2 and "expected a directory" in run.stderr and "Traceback" not in run.stderr


def test_the_delegate_reads_what_another_instance_wrote(tmp_path):
    task = load_task(DOMAIN, PROBLEM)
    with FastDownward(disk_cache=SasCache(tmp_path)) as first:
        outcome = first.solve(PlanRequest(task=task), time.monotonic() + 30)
        assert outcome.status is Status.SOLVED and outcome.details["translation"] == "translated"
    cache = SasCache(tmp_path)
    with FastDownward(disk_cache=cache) as second:
        outcome = second.solve(PlanRequest(task=task), time.monotonic() + 30)
        assert outcome.status is Status.SOLVED and outcome.details["translation"] == "disk"
        assert second.translations == 0 and cache.hits == 1
        assert validate_plan(task, outcome.plan).ok
        again = second.solve(PlanRequest(task=task), time.monotonic() + 30)  # now kept in memory as well
        assert again.details["translation"] == "memory" and cache.hits == 1


def test_an_entry_with_a_good_checksum_but_bad_sas_is_dropped(tmp_path):
    task = load_task(DOMAIN, PROBLEM)
    cache = SasCache(tmp_path)
    cache.put(cache_key(task.domain_pddl, task.problem_pddl), CachedTranslation("not a SAS task", False))
    with FastDownward(disk_cache=cache) as delegate:
        outcome = delegate.solve(PlanRequest(task=task), time.monotonic() + 30)
    assert outcome.status is Status.SOLVED and outcome.details["translation"] == "translated"
    assert cache.corrupt == 1 and cache.get(cache_key(task.domain_pddl, task.problem_pddl)).sas.startswith(
        "begin_version"
    )


def test_least_recently_used_entries_go_first(tmp_path):
    cache = SasCache(tmp_path, max_bytes=2500)
    a, b, c, d = (letter * 64 for letter in "abcd")  # keys are SHA-256 digests
    for number, key in enumerate((a, b, c)):
        cache.put(key, CachedTranslation("x" * 1000, False))
        os.utime(cache.path(key), (1000 + number, 1000 + number))
    assert not cache.path(a).exists()  # three of ~1.1 KB do not fit in 2.5 KB: the oldest went
    assert cache.get(b) is not None  # touched: now the newest
    cache.put(d, CachedTranslation("x" * 1000, False))
    assert cache.path(b).exists() and not cache.path(c).exists() and cache.path(d).exists()
    assert not list(cache.directory.glob(".tmp-*"))  # no temporary file left behind


def test_eviction_removes_only_the_caches_own_files(tmp_path):
    """`--cache-dir` may name a directory with other files in it: before, eviction deleted any `*.sas` there
    (a user's 300 MB file), oldest first, since it counted them as entries."""
    users = tmp_path / "mine.sas"
    users.write_bytes(b"x" * 5000)
    os.utime(users, (1, 1))  # older than any entry
    look_alike = tmp_path / "sas-1" / "notes.sas"
    look_alike.parent.mkdir()
    look_alike.write_bytes(b"y" * 5000)
    os.utime(look_alike, (1, 1))
    cache = SasCache(tmp_path, max_bytes=2500)
    for letter in "abc":
        cache.put(letter * 64, CachedTranslation("x" * 1000, False))
    assert users.read_bytes() == b"x" * 5000 and look_alike.exists()
    assert sorted(p.name for p in cache.directory.glob("*.sas")) == sorted(
        ["notes.sas", "b" * 64 + ".sas", "c" * 64 + ".sas"]
    )


def test_concurrent_writers_and_readers_never_see_half_an_entry(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    body = "begin_version\n" + "x" * 200_000  # large enough that a non-atomic write would be seen half-done
    seen = []

    def worker(number: int) -> None:
        cache = SasCache(tmp_path)  # one object per worker, as separate processes would have
        for _ in range(30):
            cache.put("shared", CachedTranslation(body, False))
            entry = cache.get("shared")
            seen.append(entry is not None and entry.sas == body)
            assert cache.corrupt == 0

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))
    assert all(seen) and len(seen) == 120
    assert [p.name for p in SasCache(tmp_path).directory.iterdir()] == ["shared.sas"]


def test_the_key_depends_on_the_texts_and_the_translator_version():
    from portfolio.delegates.fast_downward.sas_cache import translator_version

    assert "up-fast-downward" in translator_version() and "pipeline" in translator_version()
    base = cache_key("(define (domain d))", "(define (problem p))")
    assert base == cache_key("(define (domain d))", "(define (problem p))")
    assert base != cache_key("(define (domain d))", "(define (problem q))")
    assert base != cache_key("(define (domain d))", "(define (problem p))", version="up-fast-downward 0.0")
    assert cache_key("ab", "c") != cache_key("a", "bc")  # length-prefixed parts


def test_the_key_depends_on_the_translator_options():
    base = cache_key("(define (domain d))", "(define (problem p))")
    assert base == cache_key("(define (domain d))", "(define (problem p))", options=())
    assert base != cache_key("(define (domain d))", "(define (problem p))", options=("--keep-unreachable-facts",))


class Flags:
    """A selection that chooses `flags` for every task and leaves the race order fixed
    (`portfolio.engine.results.Selection`)."""

    def __init__(self, flags: tuple[str, ...]) -> None:
        self.flags = flags

    def predict(self, domain: str, operators: int | None = None, translator=()) -> list[str] | None:
        return None

    def predict_translator(self, domain: str, race_size: int = 2) -> tuple[str, ...]:
        return self.flags


def test_a_call_asking_other_translator_options_is_not_handed_another_translation(tmp_path):
    """Memory and disk: the default translation is not reused for a call whose selection asks other flags (nor
    the other way round), and each is found again under its own flags."""
    from test_translate import MOVERS

    (tmp_path / "domain.pddl").write_text(MOVERS[0])
    (tmp_path / "problem.pddl").write_text(MOVERS[1])
    task = load_task(tmp_path / "domain.pddl", tmp_path / "problem.pddl")
    keep = ("--keep-unreachable-facts", "--skip-variable-reordering", "--keep-unimportant-variables")
    request, deadline = PlanRequest(task=task), time.monotonic() + 60
    with FastDownward(disk_cache=SasCache(tmp_path / "cache")) as delegate:
        default, _ = delegate.translate(request, deadline)
        request = PlanRequest(task=task, selection=Flags(keep))
        kept, _ = delegate.translate(request, deadline)
        assert delegate.translations == 2 and (default.options, kept.options) == ((), keep)
        assert len(default.sas.values) == 1 and len(kept.sas.values) == 2
        outcome = delegate.solve(request, deadline)
        assert outcome.details["translation"] == "memory" and outcome.details["translator"] == list(keep)
        assert validate_plan(task, outcome.plan).ok
        request = PlanRequest(task=task, selection=Flags(("--no-such-flag",)))  # a bad choice: the defaults
        assert delegate.translate(request, deadline)[0].source == "memory" and delegate.translations == 2
    with FastDownward(disk_cache=SasCache(tmp_path / "cache"), translate_options=keep) as fresh:
        again, _ = fresh.translate(request, deadline)
        assert again.source == "disk" and again.options == keep and len(again.sas.values) == 2


def test_fixed_translator_options_are_checked_when_the_delegate_is_built():
    with pytest.raises(TranslatorOptionsError, match="'--relaxed'"):
        FastDownward(translate_options=("--relaxed",))
    stages = build_stages(["fast-downward"], 1.0, fd_translate_options=["--keep-unreachable-facts"])
    try:
        assert stages[0].delegates[0].settings.translate_options == ("--keep-unreachable-facts",)
    finally:
        stages[0].close()
