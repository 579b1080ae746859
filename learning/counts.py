"""The evidence every part of the failure model is fit on, streamed: per action name and cell (a grounding in a
situation), the steps since the cell's last change of rate, weighted by how recent they are.

    counts = Counts(half_life=5000.0, stale_half_life=2.0, change_odds=20.0)
    counts.add_rows(actions, args_json, features_json, failed, runs, timestamps)   # columns, oldest first
    counts.finish().tables["drive"]      # a CellTable: the cells' raw keys and weighted / raw counts

Three things age a step's weight, each for its own reason:

- a change point (`learning.changes`): a grounding's outcomes, in every situation and either order of its
  objects (its kin group: a road breaks for both ways and any weather), are cut where its failure rate broke or
  recovered, and only the steps since count: a road repaired after 300 failing runs is judged on the runs since.
  A break found on the merged record of the kin groups alike but for one object (every van's drives on one
  road) cuts the record of the member it is put down to (`learning.siblings.merged_breaks`);
- staleness: the evidence of a kin group whose record has a change in it halves for every `stale_half_life` of
  its usual gaps between visits that pass without one, runs being the clock, so that a tool that broke and was
  avoided drifts back to its prior and is tried again (it may have been repaired). Its gap is the runs its steps
  span over its visits, with one more visit spanning every run recorded up to its last visit, so a grounding
  seen once or twice counts as rarely visited, not as avoided; each failed re-try lengthens the gap. A record
  with no change in it (a road that always failed) does not go stale: re-trying what never worked is regret
  paid for nothing (the `thompson` and `optimistic` policies re-try it);
- `half_life` (steps of the same action name): a slow fade of old steps within a segment.

Beside them, `finish` finds each kin group's most probable share in a change another kin group alike but for one
object showed (a road that broke for one van, for the other vans: `learning.siblings`), carried as
`CellTable.shared` for the model to mix in.

A step's run is its `run_id` (a step without one is a run of its own). Steps arrive in chunks of columns
(`Counts.add_rows`) and are kept as numbers until `finish`: 21 bytes a step (its texts' numbers among the
distinct texts, `CellNumbers`; its run's; one byte for its outcome). `finish` does everything else with numpy
over all steps at once and hands each action name its cells as arrays (`CellTable`), not Python objects per
cell. Counts are keyed by the raw JSON text of a step's arguments and features, so each distinct pair is parsed
once, later (`learning.action_model.fit_action`). Why change points, staleness in gaps and no staleness for
records that never changed, and what was measured: docs/decisions/aging-evidence.md.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from learning.changes import current_segments
from learning.defaults import DEFAULT_STALE_HALF_LIFE as DEFAULT_STALE_HALF_LIFE
from learning.raw_cells import first_seen_at, ragged, stable_order, unique
from learning.siblings import families, merged_breaks, sibling_changes

RawKey = tuple[str, str]  # (args JSON, features JSON) as stored in the steps table


@dataclass
class CellTable:
    """One action name's cells (a grounding in a situation, as raw JSON texts), one entry per cell in the order
    each was first recorded: `args` and `features` index `args_texts` and `features_texts` (the distinct texts
    of every action name); `stats` columns are weighted steps, weighted failures, steps and failures, the
    weights as the module docstring says. What the weights rest on: `since_change` steps and `failures_since`
    of them since the kin group's last change, `runs_ago` (runs recorded since the cell was last seen),
    `changes` (cut in its kin group), `staleness` (the weight staleness left: 1 when fresh) and `last_seen`
    (its newest timestamp; None when no step of any cell carried one)."""

    args: np.ndarray
    features: np.ndarray
    args_texts: list[str]
    features_texts: list[str]
    stats: np.ndarray
    since_change: np.ndarray
    failures_since: np.ndarray
    runs_ago: np.ndarray
    changes: np.ndarray
    staleness: np.ndarray
    last_seen: list[str | None] | None = None
    shared: np.ndarray | None = None  # per cell [P, steps, failures] of a sibling's change (`learning.siblings`)

    def __len__(self) -> int:
        return len(self.args)

    def keys(self) -> list[RawKey]:
        """Each cell's (args JSON, features JSON)."""
        args, features = self.args_texts, self.features_texts
        return [(args[a], features[f]) for a, f in zip(self.args.tolist(), self.features.tolist())]


@dataclass
class CellNumbers:
    """Raw cells (action name, args JSON, features JSON) by number: each step's action name, arguments text and
    features text as numbers among the distinct texts (`actions`, `args`, `features`: text -> number, numbered
    in the order first met), from which `cells` numbers the distinct triples. Only the distinct texts are
    kept: no tuple of texts per cell, no text per step."""

    actions: dict[str, int] = field(default_factory=dict)
    args: dict[str, int] = field(default_factory=dict, repr=False)
    features: dict[str, int] = field(default_factory=dict, repr=False)
    step_action: array = field(default_factory=lambda: array("i"), repr=False)
    step_args: array = field(default_factory=lambda: array("i"), repr=False)
    step_features: array = field(default_factory=lambda: array("i"), repr=False)

    def __len__(self) -> int:
        return len(self.step_action)

    def add(self, actions: Sequence[str], args: Sequence[str], features: Sequence[str]) -> None:
        """Number each step's texts: new ones among a chunk's distinct texts (`dict.fromkeys` keeps the order
        first met), then a look-up per step, both in C."""
        for column, table, texts in (
            (self.step_action, self.actions, actions),
            (self.step_args, self.args, args),
            (self.step_features, self.features, features),
        ):
            for text in dict.fromkeys(texts):
                if text not in table:
                    table[text] = len(table)
            column.extend(map(table.__getitem__, texts))

    def copy(self) -> CellNumbers:
        return CellNumbers(
            dict(self.actions), dict(self.args), dict(self.features), array("i", self.step_action),
            array("i", self.step_args), array("i", self.step_features),
        )  # fmt: skip

    def steps(self, start: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The action name, arguments and features numbers of each step from the `start`-th on."""
        return tuple(  # type: ignore[return-value]
            np.frombuffer(column, dtype=np.int32)[start:].astype(np.int64)
            for column in (self.step_action, self.step_args, self.step_features)
        )

    def cells(self, start: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each step's cell from the `start`-th step on, numbered 0, 1, 2, ... in the order first met there, and
        each cell's action name, arguments and features numbers."""
        action, args, features = self.steps(start)
        pair = unique(action * max(len(self.args), 1) + args)[2]  # below 2^62: each number is below 2^31
        cell, _, at = first_seen_at(pair * max(len(self.features), 1) + features)  # `at`: each cell's first step
        return cell, action[at], args[at], features[at]


@dataclass
class Counts:
    """Steps recorded (`add_rows`, or `add` one at a time), then `finish`ed into one `CellTable` per action
    name (`tables`) and the steps per action name (`steps`)."""

    half_life: float | None
    stale_half_life: float | None = None
    change_odds: float | None = None
    tables: dict[str, CellTable] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    n_changes: int = 0
    finished: bool = False
    # every step, in order: its texts' numbers (`_numbers`), outcome, its run's number
    _failed: bytearray = field(default_factory=bytearray, repr=False)
    _run: array = field(default_factory=lambda: array("q"), repr=False)
    _numbers: CellNumbers = field(default_factory=CellNumbers, repr=False)
    _stamped: array = field(default_factory=lambda: array("q"), repr=False)  # the steps with a timestamp
    _stamps: list[str] = field(default_factory=list, repr=False)  # and their timestamps
    _run_numbers: dict[Any, int] = field(default_factory=dict, repr=False)

    @property
    def cells(self) -> dict[str, dict[RawKey, list[float]]]:
        """Per action name, per raw key: [weighted steps, weighted failures, steps, failures] (after `finish`;
        built on each access, for inspection)."""
        return {
            name: {key: [n, f, int(s), int(k)] for key, (n, f, s, k) in zip(table.keys(), table.stats.tolist())}
            for name, table in self.tables.items()
        }

    def add(self, action: str, key: RawKey, failed: bool, run: str | None = None, timestamp: str | None = None) -> None:
        """Record one step (`add_rows` for many)."""
        self.add_rows([action], [key[0]], [key[1]], [failed], [run], [timestamp])

    def add_rows(
        self,
        actions: Sequence[str],
        args: Sequence[str],
        features: Sequence[str],
        failed: Sequence[bool] | bytes,
        runs: Sequence[Any] | None = None,
        timestamps: Sequence[str | None] | None = None,
    ) -> None:
        """Record steps given as columns, oldest first: action name, args JSON, features JSON, whether it
        failed (bytes of 0/1 too), run id (None: a run of its own) and timestamp (None: not recorded)."""
        at = len(self._numbers)
        self._numbers.add(actions, args, features)
        self._failed.extend(failed if isinstance(failed, bytes | bytearray) else bytes(map(bool, failed)))
        if runs is None:
            runs = [None] * len(actions)
        if None in runs:  # a step without a run is a run of its own
            runs = [run if run is not None else (None, at + i) for i, run in enumerate(runs)]
        known = self._run_numbers
        for run in dict.fromkeys(runs):  # new runs numbered in the order first met
            if run not in known:
                known[run] = len(known)
        self._run.extend(map(known.__getitem__, runs))
        self.runs = len(known)
        if timestamps is not None and timestamps.count(None) < len(timestamps):
            stamped = [i for i, stamp in enumerate(timestamps) if stamp is not None]
            self._stamped.extend([at + i for i in stamped])
            self._stamps.extend([timestamps[i] for i in stamped])  # type: ignore[misc]

    def snapshot(self) -> Counts:
        """A `Counts` of the steps recorded so far, to `finish` apart from this one (which may go on recording):
        what the hold-out's older steps are fit on."""
        out = Counts(self.half_life, self.stale_half_life, self.change_odds, runs=self.runs)
        out._failed, out._run, out._numbers = bytearray(self._failed), array("q", self._run), self._numbers.copy()
        out._stamped, out._stamps = array("q", self._stamped), list(self._stamps)
        return out

    def tally(self, start: int) -> list[tuple[str, RawKey, int, int]]:
        """(action, raw key, steps, failures) of each cell over the steps recorded from the `start`-th on, in the
        order first recorded there (before `finish`)."""
        if start >= len(self._numbers):
            return []
        cell, cell_action, cell_args, cell_features = self._numbers.cells(start)
        failed = np.frombuffer(bytes(self._failed), dtype=np.uint8)[start:]
        steps = np.bincount(cell, minlength=len(cell_action))
        failures = np.bincount(cell, weights=failed, minlength=len(cell_action)).astype(np.int64)
        numbers = self._numbers
        actions, args, features = list(numbers.actions), list(numbers.args), list(numbers.features)
        return [
            (actions[a], (args[k], features[f]), n, x)
            for a, k, f, n, x in zip(
                cell_action.tolist(), cell_args.tolist(), cell_features.tolist(), steps.tolist(), failures.tolist()
            )
        ]

    def finish(self) -> Counts:
        """Cut each kin group at its last change, weigh its cells' steps since, and age them by staleness (call
        once, after the last `add_rows`). Vectorised over steps: a million steps over as many cells take
        seconds."""
        if self.finished:
            return self
        cell, cell_action, cell_args, cell_features = self._numbers.cells()
        failed = np.frombuffer(bytes(self._failed), dtype=np.uint8)
        run = np.frombuffer(self._run, dtype=np.int64)
        n_cells, names = len(cell_action), list(self._numbers.actions)
        action = cell_action[cell]
        per_action = np.bincount(action, minlength=len(names))
        self.steps = dict(zip(names, per_action.tolist()))
        step = step_numbers(action, per_action)  # each step's number among its action name's steps
        kin_of_cell, group_kin, kin_texts = self._kin_numbers(cell_action, cell_args)
        group = kin_of_cell[cell]
        n_groups = len(group_kin)
        cut, cuts = self._cuts(group, failed, step, n_groups)
        group_action = np.zeros(n_groups, dtype=np.int64)
        group_action[kin_of_cell] = cell_action
        objects: list[tuple[str, ...]] = []
        if self.change_odds is not None and n_groups:  # breaks the groups alike but for one object show together
            objects = [tuple(kin_texts[k].split(" ")) for k in group_kin.tolist()]
            moved = merged_breaks(cut, group, step, failed, families(group_action, objects), self.change_odds)
            cuts = cuts + (moved != cut)
            cut = moved
        self.n_changes = int(cuts.sum())
        kept = step >= cut[group]
        if self.half_life is None:
            weight = kept.astype(float)
        else:
            newest = (per_action - 1)[action]
            weight = np.where(kept, np.exp2(-(newest - step) / self.half_life), 0.0)
        group_runs_ago, gap = self._visits(group, run, n_groups)
        stale = self._staleness(group_runs_ago, gap, cuts)
        shared = np.zeros((n_groups, 3))
        if (cut >= 0).any():  # a change, for the siblings to share

            def fade(lead: int, ago: int) -> float:
                return float(self._fade(np.array([ago]), gap[lead])[0])

            shared = sibling_changes(cut, group, step, failed, group_action, objects, run, fade)
        shared = shared[kin_of_cell]
        stale_cell = stale[kin_of_cell]
        n_w = np.bincount(cell, weights=weight, minlength=n_cells) * stale_cell
        f_w = np.bincount(cell, weights=weight * failed, minlength=n_cells) * stale_cell
        total = np.bincount(cell, minlength=n_cells)
        failures = np.bincount(cell, weights=failed, minlength=n_cells)
        since = np.bincount(cell, weights=kept, minlength=n_cells).astype(np.int64)
        failures_since = np.bincount(cell, weights=kept * failed, minlength=n_cells).astype(np.int64)
        last_run = np.full(n_cells, -1, dtype=np.int64)
        np.maximum.at(last_run, cell, run)
        runs_ago = self.runs - 1 - last_run
        changes = cuts[kin_of_cell]
        stamps: list[str | None] | None = None
        if self._stamps:  # each cell's newest timestamp
            stamps = [None] * n_cells
            for number, stamp in zip(cell[np.frombuffer(self._stamped, dtype=np.int64)].tolist(), self._stamps):
                if stamp > (stamps[number] or ""):
                    stamps[number] = stamp
        args_texts, features_texts = list(self._numbers.args), list(self._numbers.features)
        # each action's cells together, in the order first met; every table a slice of these
        by_action = stable_order(cell_action)
        stats = np.column_stack([n_w[by_action], f_w[by_action], total[by_action], failures[by_action]])
        columns = [a[by_action] for a in (cell_args, cell_features, since, failures_since, runs_ago, changes)]
        stale_cell, shared = stale_cell[by_action], shared[by_action]
        if stamps is not None:
            stamps = [stamps[i] for i in by_action.tolist()]
        bounds = np.concatenate(([0], np.cumsum(np.bincount(cell_action, minlength=len(names))))).tolist()
        for a, name in enumerate(names):
            mine = slice(bounds[a], bounds[a + 1])
            self.tables[name] = CellTable(
                columns[0][mine], columns[1][mine], args_texts, features_texts, stats[mine], columns[2][mine],
                columns[3][mine], columns[4][mine], columns[5][mine], stale_cell[mine],
                None if stamps is None else stamps[mine], shared[mine],
            )  # fmt: skip
        self._run, self._failed, self._numbers = array("q"), bytearray(), CellNumbers()
        self._stamped, self._stamps = array("q"), []
        self._run_numbers.clear()
        self.finished = True
        return self

    def _cuts(
        self, group: np.ndarray, failed: np.ndarray, step: np.ndarray, n_groups: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per kin group: the action's step counter at its last change (-1: none) and how many changes were cut
        (`learning.changes`), its cells' steps merged in time order."""
        cut = np.full(n_groups, -1, dtype=np.int64)
        cuts = np.zeros(n_groups, dtype=np.int64)
        if self.change_odds is None or n_groups == 0:
            return cut, cuts
        visits = np.bincount(group, minlength=n_groups)
        fails = np.bincount(group, weights=failed, minlength=n_groups)
        mixed = np.flatnonzero((visits >= 2) & (fails > 0) & (fails < visits))  # a single outcome never changes
        if len(mixed) == 0:
            return cut, cuts
        order = stable_order(group)  # each group's steps in the order recorded
        bounds = np.concatenate(([0], np.cumsum(visits)))
        rows = order[ragged(bounds[mixed], visits[mixed])]  # the mixed groups' steps, group after group
        within = np.concatenate(([0], np.cumsum(visits[mixed])))
        start, changes = current_segments(failed[rows], within, self.change_odds)
        moved = start > 0
        cut[mixed[moved]] = step[rows[within[:-1][moved] + start[moved]]]
        cuts[mixed[moved]] = changes[moved]
        return cut, cuts

    def _visits(self, group: np.ndarray, run: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
        """Per kin group: the runs recorded since its last visit, and its gap between visits, (span + before) /
        (visits + 1), at least one run: one pseudo-visit spanning the record up to its last visit (`before`
        runs), not the absence being measured, or the gap would grow with it."""
        first = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(n_groups, -1, dtype=np.int64)
        np.minimum.at(first, group, run)
        np.maximum.at(last, group, run)
        visits = np.bincount(group, minlength=n_groups)
        gap = np.maximum((last - first + 1 + last + 1) / (visits + 1), 1.0)
        return self.runs - 1 - last, gap

    def _fade(self, runs_ago: np.ndarray, gap: np.ndarray | float) -> np.ndarray:
        """The weight staleness leaves evidence last added `runs_ago` runs back, its gap between visits `gap`:
        2^-(runs_ago / (stale_half_life * gap)), 1 when fresh or with no `stale_half_life`."""
        if self.stale_half_life is None:
            return np.ones(len(runs_ago))
        return np.where(runs_ago > 0, np.exp2(-runs_ago / (self.stale_half_life * gap)), 1.0)

    def _staleness(self, runs_ago: np.ndarray, gap: np.ndarray, cuts: np.ndarray) -> np.ndarray:
        """Per kin group, the weight left to its evidence (`_fade`) for a group with a change in its record (1
        for one without)."""
        return np.where(cuts > 0, self._fade(runs_ago, gap), 1.0)

    def _kin_numbers(self, cell_action: np.ndarray, cell_args: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Each cell's kin group (`kin_key`, per action name) as a number, each group's kin key as a number among
        the distinct ones, and those keys: each distinct arguments text parsed once."""
        kins: dict[str, int] = {}
        texts = self._numbers.args
        kin_of_args = np.array([kins.setdefault(_kin_of_text(text), len(kins)) for text in texts], dtype=np.int64)
        if len(cell_action) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), list(kins)
        kin_of_cell = unique(cell_action * max(len(kins), 1) + kin_of_args[cell_args])[2]
        group_kin = np.zeros(int(kin_of_cell.max()) + 1, dtype=np.int64)
        group_kin[kin_of_cell] = kin_of_args[cell_args]
        return kin_of_cell, group_kin, list(kins)


def columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """The first `width` columns of `rows`, each as a list (None where a row is shorter): one pass of C-level
    item getting per column, several times faster than `zip(*rows)` over tens of thousands of rows."""
    if rows and min(map(len, rows)) < width:
        rows = [(*row[:width], *(None,) * (width - len(row))) for row in rows]
    return [list(map(itemgetter(i), rows)) for i in range(width)]


def kin_key(grounding: str) -> str:
    """A grounding's kin group ("t0 p1 p4" and "t0 p4 p1" alike): its objects in any order, in every situation,
    which breaks and recovers as one (a road driven either way, in sun or rain); what change points, staleness
    and the outlier mixture (`learning.shrinkage.fit_kin_mixture`) treat as one unit."""
    return " ".join(sorted(grounding.split()))


def _kin_of_text(args_json: str) -> str:
    """`kin_key` of a stored arguments text (the text itself when it is not a JSON list)."""
    try:
        objects = json.loads(args_json)
    except ValueError:
        return args_json
    return kin_key(" ".join(str(o) for o in objects)) if isinstance(objects, list) else args_json


def step_numbers(group: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each entry's number among the entries of its group before it (0, 1, 2, ... per group, in order);
    `sizes`: each group's entries (`np.bincount(group)`)."""
    order = stable_order(group)
    starts = np.cumsum(sizes) - sizes
    out = np.empty(len(group), dtype=np.int64)
    out[order] = np.arange(len(group), dtype=np.int64) - np.repeat(starts, sizes)
    return out
