"""The fit's array paths against straightforward loops: the same numbers, to the bit.

Retraining on a million steps counts, parses and sums over arrays (`learning.counts`, `learning.raw_cells`,
`learning.timed_steps`, `learning.prior.design_parts`, `learning.action_model.record_cells`). Each is checked
here against a loop over the steps or the raw cells that says what it computes, on a few thousand steps drawn
from several generated worlds (roads that break and recover, a vehicle bad in the rain, an agent's tools,
drives with a numeric feature, retried transient failures, steps without a run or a timestamp), so an
optimisation that changes the fitted model fails here, not in a closed-loop benchmark. And the model retrained
from a store does not depend on how its steps are read in chunks (the hold-out's cut falling inside one).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from scipy.special import betaln

from domains.model import GroundAction
from learning import load_latest, retrain
from learning.action_model import ActionModel, record_cells
from learning.changes import current_segment, current_segments
from learning.counts import Counts, kin_key
from learning.features import RowParser
from learning.prior import design, design_parts
from learning.raw_cells import first_seen, parse_cells, stable_order, unique
from learning.timed_steps import RESCALE_AT, SLOTS, TimedSteps, is_transient
from portfolio.benchsuite.worlds.family import make_world
from traces import TraceStore

KINDS = (("pairs", 1), ("situation", 2), ("outage", 3), ("flapping", 4), ("few-observations", 5))
WEATHER = ("sun", "cloud", "rain")


def world_steps(episodes: int = 80, per_episode: int = 5) -> list[tuple]:
    """`steps` rows (`traces.rows.STEP_COLUMNS`) from the worlds of `KINDS`, their true failure rates drawn, and
    a busy action with a numeric feature (every step its own raw cell), interleaved."""
    rows: list[tuple] = []
    for kind, seed in KINDS:
        world = make_world(kind, seed)
        rng = random.Random(f"{kind}:{seed}")
        vehicles = list(world.vehicles)
        roads = sorted(world.roads)
        for index in range(episodes):
            spec = world.episode(index)
            run = f"{kind}-{index}"
            for k in range(per_episode):
                if kind == "few-observations":
                    tool = rng.choice(vehicles)
                    step = GroundAction(tool.rsplit("-", 1)[0], (tool,))
                else:
                    a, b = world.bad["watched"] if "watched" in world.bad and rng.random() < 0.5 else rng.choice(roads)
                    step = GroundAction("drive", (rng.choice(vehicles), a, b))
                failed = rng.random() < world.p_fail(step, spec)
                features = dict(spec.context) | ({"load": round(rng.random(), 1)} if seed % 2 else {})
                rows.append((
                    run, k, step.name, json.dumps(list(step.args), separators=(",", ":")),
                    json.dumps(features, separators=(",", ":"), sort_keys=True), "failure" if failed else "success",
                    rng.choice(["transient", "permanent", None]) if failed else None, None,
                    rng.choice([None, 5.0, 20.0 * (1 + rng.random())]), None, None, None,
                    None if rng.random() < 0.2 else f"2026-01-{1 + index % 28:02d}T{k:02d}:{rng.randrange(60):02d}:00Z",
                    None if not failed else int(rng.random() < 0.3),
                ))  # fmt: skip
    rng = random.Random(0)
    busy = []
    for i in range(1500):
        a, b, w = rng.randrange(12), rng.randrange(12), rng.randrange(3)
        failed = rng.random() < 1 / (1 + math.exp(3.0 - 2.5 * (b == 7) - 1.5 * (w == 2)))
        features = json.dumps({"load": round(rng.random(), 2), "weather": WEATHER[w]}, separators=(",", ":"))
        busy.append((f"busy{i // 20}", i % 20, "move", f'["o{a}","o{b}"]', features,
                     "failure" if failed else "success", None, None, 5.0, None, None, None, None, None))  # fmt: skip
    mixed = []
    for i, row in enumerate(rows):
        mixed.append(row)
        if i % 2 and busy:
            mixed.append(busy.pop())
    return mixed + busy


@pytest.fixture(scope="module")
def steps() -> list[tuple]:
    return world_steps()


def failure_rows(steps: list[tuple]) -> list[tuple]:
    """The failure model's columns (action, args, features, outcome, run, timestamp); a few steps without a
    run, which count as runs of their own."""
    return [(s[2], s[3], s[4], s[5], None if i % 97 == 5 else s[0], s[12]) for i, s in enumerate(steps)]


def time_rows(steps: list[tuple]) -> list[tuple]:
    """The time model's columns (action, args, features, outcome, category, ms, side effects, run)."""
    return [(s[2], s[3], s[4], s[5], s[6], s[8], s[13], s[0]) for s in steps]


# -- counting ---------------------------------------------------------------------------------------------------


def counted(rows: list[tuple], half_life: float | None, stale: float | None, odds: float | None) -> dict:
    """Per action name, per raw key: [weighted steps, weighted failures, steps, failures, since the last change,
    failures since, runs ago, changes, staleness, newest timestamp], step by step as `learning.counts` says."""
    counter: dict[str, int] = {}
    run_numbers: dict[object, int] = {}
    steps = []  # (action, key, failed, its number among the action's steps, run number, timestamp)
    for action, args, features, outcome, run, stamp in rows:
        k = counter.get(action, 0)
        counter[action] = k + 1
        if run is None:
            run = object()
        number = run_numbers.setdefault(run, len(run_numbers))
        steps.append((action, (args, features or "{}"), outcome == "failure", k, number, stamp))
    runs = len(run_numbers)
    kin = {}
    for action, (args, _), *_ in steps:
        objects = json.loads(args)
        kin[(action, args)] = (action, kin_key(" ".join(str(o) for o in objects)))
    groups: dict[tuple, list] = {}
    for step in steps:
        groups.setdefault(kin[(step[0], step[1][0])], []).append(step)
    cut, changes, weight_left = {}, {}, {}
    for group, members in groups.items():
        outcomes = [int(s[2]) for s in members]
        cut[group], changes[group] = -1, 0
        if odds is not None and len(outcomes) >= 2 and 0 < sum(outcomes) < len(outcomes):
            segment = current_segment(outcomes, odds)
            if segment.start > 0:
                cut[group], changes[group] = members[segment.start][3], len(segment.changes)
    if odds is not None:
        merged_cuts(steps, groups, {s[:2]: kin[(s[0], s[1][0])] for s in steps}, cut, changes, odds)
    for group, members in groups.items():
        first, last = min(s[4] for s in members), max(s[4] for s in members)
        ago, gap = runs - 1 - last, max((last - first + 1 + last + 1) / (len(members) + 1), 1.0)
        stale_weight = 1.0
        if stale is not None and changes[group] > 0 and ago > 0:
            stale_weight = float(np.exp2(-ago / (stale * gap)))
        weight_left[group] = stale_weight
    out: dict[str, dict] = {}
    for action, key, failed, k, run, stamp in steps:
        group = kin[(action, key[0])]
        kept = k >= cut[group]
        weight = float(kept)
        if half_life is not None and kept:
            weight = float(np.exp2(-(counter[action] - 1 - k) / half_life))
        cell = out.setdefault(action, {}).setdefault(key, [0.0, 0.0, 0, 0, 0, 0, -1, 0, 0.0, None])
        cell[0] += weight
        cell[1] += weight * failed
        cell[2] += 1
        cell[3] += failed
        cell[4] += kept
        cell[5] += kept and failed
        cell[6] = max(cell[6], run)
        cell[7], cell[8] = changes[group], weight_left[group]
        if stamp is not None and stamp > (cell[9] or ""):
            cell[9] = stamp
    for table in out.values():
        for cell in table.values():
            cell[0] *= cell[8]
            cell[1] *= cell[8]
            cell[6] = runs - 1 - cell[6]
    return out


def merged_cuts(steps: list, groups: dict, group_of: dict, cut: dict, changes: dict, odds: float) -> None:
    """Moves `cut` (and counts `changes`) where a break on a family's merged record is put down to a member, one
    family at a time, as `learning.siblings.merged_breaks` says: kin groups in the order of their action name's
    first step and their kin key's, a family per object left out, its members' steps in the order recorded."""
    action_rank: dict[str, int] = {}
    kin_rank: dict[str, int] = {}
    for action, (args, _), *_ in steps:
        action_rank.setdefault(action, len(action_rank))
        kin_rank.setdefault(kin_key(" ".join(str(o) for o in json.loads(args))), len(kin_rank))
    order = sorted(groups, key=lambda g: (action_rank[g[0]], kin_rank[g[1]]))
    families: dict[tuple, list] = {}
    for group in order:
        objects = group[1].split(" ")
        for i in range(len(objects) if len(objects) >= 2 else 0):
            found = families.setdefault((group[0], tuple(objects[:i] + objects[i + 1 :])), [])
            if group not in found:
                found.append(group)
    own = dict(cut)
    for members in families.values():
        if len(members) < 2:
            continue
        merged = sorted((s for g in members for s in groups[g]), key=lambda s: s[3])
        outcomes = [int(s[2]) for s in merged]
        start = current_segment(outcomes, odds).start if 0 < sum(outcomes) < len(outcomes) else 0
        if start == 0 or sum(outcomes[start:]) / len(outcomes[start:]) <= sum(outcomes[:start]) / start:
            continue
        since = {g: 0 for g in members}
        for s in merged[start:]:
            since[group_of[s[:2]]] += s[2]
        lead = max(members, key=lambda g: (since[g], -order.index(g)))
        mine = [s for s in merged if group_of[s[:2]] == lead]
        after = [int(s[2]) for s in mine if s[3] >= merged[start][3]]
        before = [int(s[2]) for s in mine if cut[lead] <= s[3] < merged[start][3]]
        at = next(s[3] for s in mine if s[3] >= merged[start][3])
        if at <= cut[lead] or not before:
            continue
        a, f0, f1 = 0.5, sum(before), sum(after)
        log_odds = (
            betaln(f0 + a, len(before) - f0 + a) + betaln(f1 + a, len(after) - f1 + a) - betaln(a, a)
            - betaln(f0 + f1 + a, len(before) + len(after) - f0 - f1 + a)
        )  # fmt: skip
        if log_odds > 0:
            cut[lead] = at
    for group in cut:
        changes[group] += cut[group] != own[group]


@pytest.mark.parametrize("half_life, stale, odds", [(5000.0, 2.0, 20.0), (40.0, 0.5, 3.0), (None, None, None)])
def test_counts_in_chunks_equal_a_loop_over_the_steps(steps, half_life, stale, odds) -> None:
    rows = failure_rows(steps)
    counts = Counts(half_life, stale, odds)
    older = None
    for start in range(0, len(rows), 777):
        chunk = list(zip(*rows[start : start + 777]))
        counts.add_rows(chunk[0], chunk[1], chunk[2], [o == "failure" for o in chunk[3]], chunk[4], chunk[5])
        if start == 777 * 3:
            older = counts.snapshot()
    assert older is not None
    for stream, found in ((rows, counts.finish()), (rows[: 777 * 4], older.finish())):
        expected = counted(stream, half_life, stale, odds)
        assert list(found.tables) == list(expected)
        for action, table in found.tables.items():
            assert table.keys() == list(expected[action])
            want = np.array([cell[:9] for cell in expected[action].values()], dtype=float)
            got = np.column_stack([
                table.stats, table.since_change, table.failures_since, table.runs_ago, table.changes, table.staleness
            ])  # fmt: skip
            assert np.array_equal(got[:, 2:8], want[:, 2:8])  # counts and records: exactly
            # the weights: numpy's exp2 over an array against one value at a time (the sums in the same order)
            assert np.allclose(got[:, [0, 1, 8]], want[:, [0, 1, 8]], rtol=1e-12, atol=0.0)
            assert table.last_seen == [cell[9] for cell in expected[action].values()]


def test_segments_found_together_are_those_found_one_sequence_at_a_time() -> None:
    """Breaks, recoveries, flapping, stationary and single-outcome sequences of 0 to 400 steps."""
    rng = np.random.default_rng(1)
    sequences = []
    for _ in range(400):
        n = int(rng.integers(0, 400))
        rates = rng.choice([0.02, 0.3, 0.8], size=int(rng.integers(1, 5)))
        phase = np.sort(rng.integers(0, n + 1, size=len(rates) - 1))
        p = np.repeat(rates, np.diff(np.concatenate(([0], phase, [n]))))
        sequences.append((rng.random(n) < p).astype(np.uint8))
    bounds = np.concatenate(([0], np.cumsum([len(x) for x in sequences])))
    for odds in (20.0, 3.0):
        start, changes = current_segments(np.concatenate(sequences), bounds, odds)
        one_by_one = [current_segment(x, odds) for x in sequences]
        assert start.tolist() == [segment.start for segment in one_by_one]
        assert changes.tolist() == [len(segment.changes) for segment in one_by_one]
        assert sum(changes) > 50


def test_numbering_without_sorting_is_numpys() -> None:
    rng = np.random.default_rng(2)
    for size, top in ((0, 1), (1, 1), (1000, 10), (5000, 3000), (200, 10**9), (100_000, 70_000)):
        values = rng.integers(0, top, size)
        expected = np.unique(values, return_index=True, return_inverse=True)
        assert all(np.array_equal(got, want.reshape(-1)) for got, want in zip(unique(values), expected))
        assert np.array_equal(stable_order(values), np.argsort(values, kind="stable"))
        rank, distinct = first_seen(values)
        assert np.array_equal(distinct[rank], values)
        assert np.array_equal(rank[np.sort(expected[1])], np.arange(len(expected[0])))  # numbered as first met


# -- the time model's sums --------------------------------------------------------------------------------------


def timed(rows: list[tuple], half_life: float | None) -> tuple[dict, float, int, list[float]]:
    """Per action name, per raw key, the `learning.timed_steps.SLOTS` sums, a running sum per step (the weights
    doubling per `half_life` steps, rescaled past 2^RESCALE_AT, the newest weighing 1); total ms, timed steps and
    each run's ms."""
    tables: dict[str, dict] = {}
    counter: dict[str, int] = {}
    offsets: dict[str, int] = {}
    runs: dict[object, float] = {}
    last: dict[object, tuple] = {}
    total, timed_steps = 0.0, 0
    for action, args, features, outcome, category, ms, side, run in rows:
        table = tables.setdefault(action, {})
        k = counter.get(action, 0)
        counter[action] = k + 1
        weight = 1.0
        if half_life is not None:
            exponent = (k - offsets.get(action, 0)) / half_life
            if exponent > RESCALE_AT:
                for acc in table.values():
                    acc[:] = [x * 2.0**-exponent for x in acc]
                offsets[action], exponent = k, 0.0
            weight = 2.0**exponent
        acc = table.setdefault((args, features or "{}"), [0.0] * SLOTS)
        is_timed = ms is not None and 0.0 <= ms < math.inf
        if is_timed:
            timed_steps += 1
            total += ms
            if run is not None:
                runs[run] = runs.get(run, 0.0) + ms
        failed, retryable = outcome == "failure", False
        acc[12] += weight
        if failed:
            transient, side_effects = is_transient(category), bool(side)
            retryable = transient and not side_effects
            if is_timed:
                acc[3], acc[4], acc[5] = acc[3] + weight, acc[4] + weight * ms, acc[5] + weight * ms * ms
            acc[6] += weight
            acc[7] += weight * transient
            acc[8] += weight * side_effects
            acc[9] += weight * retryable
        elif is_timed and outcome == "success":
            acc[0], acc[1], acc[2] = acc[0] + weight, acc[1] + weight * ms, acc[2] + weight * ms * ms
        if run is not None:
            previous = last.get(run)
            if previous is not None and previous == (action, args, True):
                acc[10] += weight
                acc[11] += weight * failed
            last[run] = (action, args, retryable)
    if half_life is not None:
        for action, table in tables.items():
            factor = 2.0 ** -((counter[action] - 1 - offsets.get(action, 0)) / half_life)
            for acc in table.values():
                acc[:] = [x * factor for x in acc]
    return tables, total, timed_steps, list(runs.values())


@pytest.mark.parametrize("half_life", [5000.0, 0.4, None])  # 0.4: rescaled every 201 steps of an action
def test_timed_steps_equal_a_loop_over_the_steps(steps, half_life) -> None:
    rows = time_rows(steps)
    for i in range(0, len(rows), 50):  # retries: the same grounding again, in the same run, after a failure
        rows[i + 1] = (*rows[i][:3], "failure", "transient", *rows[i + 1][5:7], rows[i][7])
        rows[i] = (*rows[i][:3], "failure", " Transient", rows[i][5], None, rows[i][7])
    accumulated = TimedSteps(half_life)
    for start in range(0, len(rows), 500):
        accumulated.add(rows[start : start + 500])
    tables, totals = accumulated.finish()
    expected, total, timed_steps, run_ms = timed(rows, half_life)
    assert (totals.total_ms, totals.timed_steps, totals.run_ms) == (total, timed_steps, run_ms)
    assert list(tables) == list(expected)
    for action, table in tables.items():
        keys = [(table.args_texts[a], table.features_texts[f]) for a, f in zip(table.args, table.features)]
        assert keys == list(expected[action])
        assert table.stats.tolist() == list(expected[action].values())


# -- parsing, the design and the cells' records -----------------------------------------------------------------


@pytest.fixture(scope="module")
def tables(steps) -> dict:
    rows = failure_rows(steps)
    counts = Counts(5000.0, 2.0, 20.0)
    columns = list(zip(*rows))
    counts.add_rows(columns[0], columns[1], columns[2], [o == "failure" for o in columns[3]], columns[4], columns[5])
    return counts.finish().tables


def test_the_design_by_parts_is_the_design_row_by_row(tables) -> None:
    for table in tables.values():
        parser, reference = RowParser(), RowParser()
        rows = parse_cells(table.args, table.features, table.args_texts, table.features_texts, parser)
        X, vocab = design_parts(rows.parts, len(table))
        Y, expected = design([reference.row(*key)[2] for key in table.keys()])
        assert list(vocab.items()) == list(expected.items())
        assert X.shape == Y.shape
        for got, want in ((X.indptr, Y.indptr), (X.indices, Y.indices), (X.data, Y.data)):
            assert np.array_equal(got, want)


def test_the_cells_records_are_a_loop_over_the_raw_cells(tables) -> None:
    rng = np.random.default_rng(0)
    for name, table in tables.items():
        rows = parse_cells(table.args, table.features, table.args_texts, table.features_texts, RowParser())
        prior, predicted = rng.random(len(table)), rng.random(len(table))
        found = ActionModel("rate", 10.0, 0.05)
        record_cells(found, table, rows, prior, predicted, 0.05)
        cells: dict[str, list] = {}
        evidence: dict[str, list] = {}
        groundings: dict[str, list] = {}
        recent: dict[str, list] = {}
        last_seen: dict[str, str] = {}
        parser = RowParser()
        for i, key in enumerate(table.keys()):
            args, _, _, cell_key, grounding = parser.row(*key)
            n, f, steps, failures = table.stats[i]
            cell = cells.setdefault(cell_key, [0.0] * 5)
            cell[0], cell[1], cell[2], cell[3], cell[4] = (
                cell[0] + n, cell[1] + f, cell[2] + prior[i] * n, cell[3] + steps, cell[4] + failures
            )  # fmt: skip
            for position, obj in enumerate(args):
                seen = evidence.setdefault(f"a{position}:{obj}", [0.0, 0.0])
                seen[0], seen[1] = seen[0] + n, seen[1] + f
            record = groundings.setdefault(grounding, [0.0, 0.0, 0.0])
            record[0], record[1], record[2] = record[0] + n, record[1] + f, record[2] + predicted[i] * n
            mine = [
                int(table.since_change[i]), int(table.failures_since[i]), int(table.runs_ago[i]),
                int(table.changes[i]), float(table.staleness[i]),
            ]  # fmt: skip
            if cell_key in recent:
                old = recent[cell_key]
                mine = [old[0] + mine[0], old[1] + mine[1], min(old[2], mine[2]), max(old[3], mine[3]),
                        max(old[4], mine[4])]  # fmt: skip
            recent[cell_key] = mine
            stamp = table.last_seen[i] if table.last_seen is not None else None
            if stamp is not None and stamp > last_seen.get(cell_key, ""):
                last_seen[cell_key] = stamp
        for cell in cells.values():
            cell[2] = cell[2] / cell[0] if cell[0] > 0 else 0.05
        for record in groundings.values():
            record[2] = record[2] / record[0] if record[0] > 0 else 0.05
        for got, want in (
            (found.cells, cells), (found.evidence, evidence), (found.groundings, groundings),
            (found.recent, recent), (found.last_seen, last_seen),
        ):  # fmt: skip
            assert list(got) == list(want), name
            assert list(got.values()) == list(want.values()), name


# -- the whole fit ----------------------------------------------------------------------------------------------


def test_the_retrained_model_does_not_depend_on_how_the_store_is_read(steps, tmp_path: Path) -> None:
    """Chunks of 2,000 steps against chunks of 333, the hold-out's cut inside one: every grounding seen, in
    every situation seen and one never seen, the same p_fail and concentration, and the same hold-out scores."""
    found = []
    for chunk_size in (2000, 333):
        with TraceStore(tmp_path / f"{chunk_size}.db") as store:
            store._record_rows(steps)
            info = retrain(store, chunk_size=chunk_size)
            found.append((load_latest(store), info.metrics))
    (first, first_metrics), (second, second_metrics) = found
    assert first_metrics == second_metrics and first_metrics["heldout_steps"] > 0
    groundings = sorted({(s[2], tuple(json.loads(s[3]))) for s in steps})
    actions = [GroundAction(name, args) for name, args in groundings]
    for situation in ({"weather": w} for w in (*WEATHER, "hail")):
        a, b = first.predict_posterior(actions, situation), second.predict_posterior(actions, situation)
        assert np.max(np.abs(a[0] - b[0])) <= 1e-9 and np.array_equal(a[1], b[1])
