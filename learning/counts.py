"""The evidence every part of the failure model is fit on, streamed: per action name and cell (a grounding in a
situation), the steps since the cell's last change of rate, weighted by how recent they are.

Three things age a step's weight, each for its own reason:

- a change point (`learning.changes`): a grounding's outcomes, in every situation and either order of its
  objects (its kin group: a road breaks for both ways and any weather), are cut where its failure rate broke
  or recovered, and only the steps since count. A road repaired after 300 failing runs is judged on the runs
  since;
- staleness: the evidence of a kin group whose record has a change in it (it broke, or recovered) halves for
  every `stale_half_life` of its usual gaps between visits that pass without one, runs being the clock, so
  that a tool that broke and was avoided drifts back to its prior and is tried again: it may have been
  repaired, and nobody sees that unless it is tried. Its gap is the runs its steps span over its visits, with
  one more visit spanning every run recorded up to its last visit, so that a grounding seen once or twice
  counts as rarely visited, not as avoided. A record with no change in it (a road that always failed, a tool
  that always worked) does not go stale: re-trying what never worked cost 0.05 of the oracle's success on
  held-out detours worlds, where the shortcut fails 75% from its first use (docs/decisions/aging-evidence.md);
  the `thompson` and `optimistic` policies re-try it. Each failed re-try lengthens the gap, so a tool that
  stays broken is re-tried less and less often;
- `half_life` (steps of the same action name): a slow fade of old steps within a segment.

Runs are the clock: a step's run is its `run_id` (a step without one is a run of its own). Steps are kept as
one byte (outcome) and three integers (its cell, the action's step counter, the run's number) each until
`finish`, so a million steps take about 25 MB besides the dictionary of distinct cells.

Counts are keyed by the raw JSON text of a step's arguments and features, so a million steps cost a million
dictionary updates and each distinct (arguments, features) is parsed once, later.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field

import numpy as np

from learning.changes import current_segment

RawKey = tuple[str, str]  # (args JSON, features JSON) as stored in the steps table

DEFAULT_STALE_HALF_LIFE = 2.0  # a kin group's usual gaps between visits


@dataclass
class Recent:
    """What a cell's current evidence rests on: its steps and failures since its last change (`since_change`
    steps, `failures_since`), how many runs were recorded since it was last seen, how many changes were cut,
    the weight staleness left its evidence (1: seen in the newest run), and its newest timestamp."""

    since_change: int
    failures_since: int
    runs_ago: int
    changes: int
    staleness: float
    last_seen: str | None = None


@dataclass
class Counts:
    """Per action name, per raw key: [weighted steps, weighted failures, steps, failures] once `finish`ed, the
    weights as the module docstring says; `recent` says what each cell's weights rest on."""

    half_life: float | None
    stale_half_life: float | None = None
    change_odds: float | None = None
    cells: dict[str, dict[RawKey, list[float]]] = field(default_factory=dict)
    recent: dict[str, dict[RawKey, Recent]] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    n_changes: int = 0
    finished: bool = False
    # every step, in order: its cell's number, outcome, the action's step counter, its run's number
    _cell: array = field(default_factory=lambda: array("q"), repr=False)
    _failed: bytearray = field(default_factory=bytearray, repr=False)
    _step: array = field(default_factory=lambda: array("q"), repr=False)
    _run: array = field(default_factory=lambda: array("q"), repr=False)
    _cells: dict[tuple[str, RawKey], int] = field(default_factory=dict, repr=False)
    _last_seen: dict[int, str] = field(default_factory=dict, repr=False)
    _run_numbers: dict[str, int] = field(default_factory=dict, repr=False)

    def add(self, action: str, key: RawKey, failed: bool, run: str | None = None, timestamp: str | None = None) -> None:
        k = self.steps.get(action, 0)
        self.steps[action] = k + 1
        if run is None:
            number = self.runs
            self.runs += 1
        else:
            number = self._run_numbers.get(run, -1)
            if number < 0:
                number = self._run_numbers[run] = self.runs
                self.runs += 1
        cell = self._cells.setdefault((action, key), len(self._cells))
        self._cell.append(cell)
        self._failed.append(1 if failed else 0)
        self._step.append(k)
        self._run.append(number)
        if timestamp is not None and timestamp > self._last_seen.get(cell, ""):
            self._last_seen[cell] = timestamp

    def finish(self) -> Counts:
        """Cut each kin group at its last change, weigh its cells' steps since, and age them by staleness (call
        once, after the last `add`). Vectorised over steps: a million steps over as many cells take seconds."""
        if self.finished:
            return self
        names = list(self._cells)
        cell = np.frombuffer(self._cell, dtype=np.int64)
        failed = np.frombuffer(bytes(self._failed), dtype=np.uint8)
        step = np.frombuffer(self._step, dtype=np.int64)
        run = np.frombuffer(self._run, dtype=np.int64)
        n_cells = len(names)
        kin_of_cell = _kin_numbers(names)
        group = kin_of_cell[cell]
        n_groups = int(kin_of_cell.max()) + 1 if n_cells else 0
        cut, cuts = self._cuts(group, failed, step, n_groups)
        self.n_changes = int(cuts.sum())
        kept = step >= cut[group]
        if self.half_life is None:
            weight = kept.astype(float)
        else:
            newest = np.array([self.steps[action] - 1 for action, _ in names], dtype=np.int64)[cell]
            weight = np.where(kept, np.exp2(-(newest - step) / self.half_life), 0.0)
        stale = self._staleness(group, run, cuts, n_groups)
        stale_cell = stale[kin_of_cell]
        n_w = np.bincount(cell, weights=weight, minlength=n_cells) * stale_cell
        f_w = np.bincount(cell, weights=weight * failed, minlength=n_cells) * stale_cell
        total = np.bincount(cell, minlength=n_cells)
        failures = np.bincount(cell, weights=failed, minlength=n_cells)
        since = np.bincount(cell, weights=kept, minlength=n_cells)
        failures_since = np.bincount(cell, weights=kept * failed, minlength=n_cells)
        last_run = np.full(n_cells, -1, dtype=np.int64)
        np.maximum.at(last_run, cell, run)
        runs_ago = self.runs - 1 - last_run
        columns = zip(
            names, n_w.tolist(), f_w.tolist(), total.tolist(), failures.astype(np.int64).tolist(),
            since.astype(np.int64).tolist(), failures_since.astype(np.int64).tolist(), runs_ago.tolist(),
            cuts[kin_of_cell].tolist(), stale_cell.tolist(),
        )  # fmt: skip
        last_seen = self._last_seen
        for i, ((action, key), n, f, steps, fails, kept_steps, kept_fails, ago, changes, weight) in enumerate(columns):
            cells = self.cells.get(action)
            if cells is None:
                cells, self.recent[action] = self.cells.setdefault(action, {}), {}
            cells[key] = [n, f, steps, fails]
            self.recent[action][key] = Recent(kept_steps, kept_fails, ago, changes, weight, last_seen.get(i))
        self._cell, self._step, self._run, self._failed = array("q"), array("q"), array("q"), bytearray()
        self._cells.clear()
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
        order = np.argsort(group, kind="stable")  # each group's steps in the order recorded
        bounds = np.concatenate(([0], np.cumsum(visits)))
        for g in mixed:
            rows = order[bounds[g] : bounds[g + 1]]
            segment = current_segment(failed[rows], self.change_odds)
            if segment.start > 0:
                cut[g], cuts[g] = step[rows[segment.start]], len(segment.changes)
        return cut, cuts

    def _staleness(self, group: np.ndarray, run: np.ndarray, cuts: np.ndarray, n_groups: int) -> np.ndarray:
        """Per kin group, the weight left to its evidence: 2^-(runs_ago / (stale_half_life * gap)) for a group
        with a change in its record (1 for one without), runs_ago being the runs recorded since its last visit
        and its gap between visits (span + before) / (visits + 1), at least one run: one pseudo-visit spanning
        the record up to its last visit (`before` runs), not the absence being measured, or the gap would grow
        with it."""
        if self.stale_half_life is None or n_groups == 0:
            return np.ones(n_groups)
        first = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(n_groups, -1, dtype=np.int64)
        np.minimum.at(first, group, run)
        np.maximum.at(last, group, run)
        visits = np.bincount(group, minlength=n_groups)
        runs_ago = self.runs - 1 - last
        gap = np.maximum((last - first + 1 + last + 1) / (visits + 1), 1.0)
        stale = np.exp2(-runs_ago / (self.stale_half_life * gap))
        return np.where((cuts > 0) & (runs_ago > 0), stale, 1.0)


def kin_key(grounding: str) -> str:
    """A grounding's kin group ("t0 p1 p4" and "t0 p4 p1" alike): its objects in any order, in every situation,
    which breaks and recovers as one (a road driven either way, in sun or rain); what change points, staleness
    and the outlier mixture (`learning.shrinkage.fit_kin_mixture`) treat as one unit."""
    return " ".join(sorted(grounding.split()))


def _kin_numbers(names: list[tuple[str, RawKey]]) -> np.ndarray:
    """Each cell's kin group (`kin_key`, per action name) as a number."""
    numbers: dict[tuple[str, str], int] = {}
    kin_of_args: dict[str, str] = {}
    out = np.empty(len(names), dtype=np.int64)
    for i, (action, (args_json, _features)) in enumerate(names):
        kin = kin_of_args.get(args_json)
        if kin is None:
            try:
                objects = json.loads(args_json)
                kin = kin_key(" ".join(str(o) for o in objects)) if isinstance(objects, list) else args_json
            except ValueError:
                kin = args_json
            kin_of_args[args_json] = kin
        out[i] = numbers.setdefault((action, kin), len(numbers))
    return out
