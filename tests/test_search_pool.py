"""The search process pool: a run given back is stopped at once, and what follows (reaping it, removing its files,
starting its replacement) happens on the pool's thread, not while the caller's searches run."""

from __future__ import annotations

import time

import pytest
from support import descendants, poll, wait_until

from portfolio.delegates.fast_downward.searches import search_binary
from portfolio.engine.search_pool import SearchProcessPool

COMMAND = (str(search_binary()), "--search", "astar(blind())")


def live_children(within_s: float, count: int) -> list[int]:
    """This process's live descendants once there are `count` of them (or after `within_s`, whatever they are)."""
    return poll(lambda: list(descendants()), lambda pids: len(pids) == count, within_s, every=0.01)  # no zombies


def replacement_for(killed: int, before: set[int], within_s: float) -> set[int]:
    """The live descendants other than `killed` and those of `before`, once there is one (or after `within_s`):
    right after its SIGKILL the killed run may still be alive for a moment, and must not pass for it."""
    return poll(lambda: set(descendants()) - before - {killed}, bool, within_s, every=0.01)


@pytest.mark.serial  # asserts that giving a run back takes under 50 ms
def test_the_replacement_starts_when_a_run_is_given_back_not_while_it_runs():
    before = set(descendants())
    pool = SearchProcessPool()
    try:
        run = pool.take(COMMAND)
        # time passing is the point (an absence is asserted): a replacement started at take would be up by now
        time.sleep(0.3)
        assert set(live_children(0.0, 1)) - before == {run.process.pid}  # the run alone: no process beside it
        started = time.monotonic()
        pool.release(run)
        assert time.monotonic() - started < 0.05  # killed, not waited for
        replacement = replacement_for(run.process.pid, before, 5.0)
        assert len(replacement) == 1  # one started for it
        assert run.process.pid not in set(live_children(5.0, len(before) + 1))  # and the run stopped
        assert run.process.returncode is not None  # reaped on the pool's thread
        # the replacement's pid shows a moment before the pool has it ready
        wait_until(lambda: COMMAND in pool._ready, 5, "the pool to have the replacement ready", every=0.01)
        again = pool.take(COMMAND)
        assert again.process.pid in replacement  # the next call takes the pre-started one
        pool.release(again)
    finally:
        pool.close()
    assert set(live_children(5.0, len(before))) <= before


def test_close_kills_and_reaps_every_ready_search():
    before = set(descendants())
    pool = SearchProcessPool()
    commands = [(*COMMAND[:-1], search) for search in ("astar(blind())", "astar(lmcut())", "eager_greedy([ff()])")]
    try:
        for command in commands:
            pool.prestart(command)
        wait_until(lambda: all(c in pool._ready for c in commands), 10, "three searches ready", every=0.01)
        runs = [pool._ready[c] for c in commands]
    finally:
        pool.close()
    assert all(run.process.returncode is not None for run in runs)  # reaped by close, not left as zombies
    assert set(live_children(5.0, len(before))) <= before
