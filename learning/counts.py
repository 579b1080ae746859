"""The evidence every part of the failure model is fit on, streamed: per action name and cell (a grounding in a
situation), the steps since the cell's last change of rate, weighted by how recent they are.

Three things age a step's weight, each for its own reason:

- a change point (`learning.changes`): a grounding's outcomes, in every situation and either order of its
  objects (its kin group: a road breaks for both ways and any weather), are cut where its failure rate broke
  or recovered, and only the steps since count. A road repaired after 300 failing runs is judged on the runs
  since;
- staleness: a kin group's evidence halves for every `stale_half_life` of its usual gaps between visits that
  pass without one, runs being the clock. Its gap is the runs its steps span over its visits, with one more visit
  spanning every run recorded up to its last visit, so that a grounding seen once or twice counts as rarely
  visited, not as avoided.
  A road driven in 50 runs in a row, broken, then avoided, has its evidence halved every 8 runs (4 gaps of
  about 2 runs) and drifts back to the prior, so the planner tries it again; a road driven once in a while
  is not stale after a while. Without staleness an action priced out is never executed again, and nobody
  sees it recover. Each failed re-try lengthens the gap, so a tool that stays broken is re-tried less often;
- `half_life` (steps of the same action name): a slow fade of old steps within a segment.

Runs are the clock: a step's run is its `run_id` (a step without one is a run of its own). Steps are kept as
one byte (outcome) and two integers (the action's step counter, the run's number) each until `finish`, so a
million steps take about 17 MB.

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
# A record that never changed goes stale this many times more slowly: a tool that failed from its first call is
# less likely to come back than one that worked, broke and may be repaired, and every re-try of the first kind
# is a failure paid for nothing (`portfolio bench learning`'s detours worlds, docs/decisions/aging-evidence.md).
UNCHANGED_SLOWER = 4.0


@dataclass
class _Trace:
    """One cell's steps as recorded, until `Counts.finish`."""

    outcomes: bytearray = field(default_factory=bytearray)
    step: array = field(default_factory=lambda: array("q"))  # the action name's step counter at each step
    run: array = field(default_factory=lambda: array("q"))  # the run number of each step
    last_seen: str | None = None  # the newest timestamp among its steps, as recorded


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
    _traces: dict[str, dict[RawKey, _Trace]] = field(default_factory=dict, repr=False)
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
        table = self._traces.get(action)
        if table is None:
            table = self._traces[action] = {}
        trace = table.get(key)
        if trace is None:
            trace = table[key] = _Trace()
        trace.outcomes.append(1 if failed else 0)
        trace.step.append(k)
        trace.run.append(number)
        if timestamp is not None and (trace.last_seen is None or timestamp > trace.last_seen):
            trace.last_seen = timestamp

    def finish(self) -> Counts:
        """Cut each cell at its last change, weigh its steps since, and age them by staleness (call once, after
        the last `add`)."""
        if self.finished:
            return self
        newest_run = self.runs - 1
        for action, table in self._traces.items():
            cells, recent = self.cells.setdefault(action, {}), self.recent.setdefault(action, {})
            newest_step = self.steps[action] - 1
            for keys in _kin_groups(table).values():
                cut, n_cuts, stale = self._group(keys, table)
                for key in keys:
                    trace = table[key]
                    steps = np.frombuffer(trace.step, dtype=np.int64)
                    start = int(np.searchsorted(steps, cut)) if cut is not None else 0
                    outcomes = np.frombuffer(bytes(trace.outcomes), dtype=np.uint8)
                    tail = outcomes[start:].astype(float)
                    if self.half_life is None:
                        weight = np.ones(len(tail))
                    else:
                        weight = np.exp2(-(newest_step - steps[start:]) / self.half_life)
                    cells[key] = [
                        float(weight.sum()) * stale,
                        float((weight * tail).sum()) * stale,
                        len(outcomes),
                        int(outcomes.sum()),
                    ]
                    runs_ago = newest_run - trace.run[-1]
                    recent[key] = Recent(len(tail), int(tail.sum()), runs_ago, n_cuts, stale, trace.last_seen)
        self._traces.clear()
        self._run_numbers.clear()
        self.finished = True
        return self

    def _group(self, keys: list[RawKey], table: dict[RawKey, _Trace]) -> tuple[int | None, int, float]:
        """A kin group's (the action's step counter at its last change or None, how many changes, staleness):
        its cells' steps merged in time order, cut and aged as one record."""
        traces = [table[key] for key in keys]
        if len(traces) == 1:
            outcomes = np.frombuffer(bytes(traces[0].outcomes), dtype=np.uint8)
            steps = np.frombuffer(traces[0].step, dtype=np.int64)
            run_numbers = np.frombuffer(traces[0].run, dtype=np.int64)
        else:
            steps = np.concatenate([np.frombuffer(t.step, dtype=np.int64) for t in traces])
            order = np.argsort(steps, kind="stable")
            steps = steps[order]
            outcomes = np.concatenate([np.frombuffer(bytes(t.outcomes), dtype=np.uint8) for t in traces])[order]
            run_numbers = np.concatenate([np.frombuffer(t.run, dtype=np.int64) for t in traces])[order]
        cut, n_cuts = None, 0
        if self.change_odds is not None:
            segment = current_segment(outcomes, self.change_odds)
            n_cuts = len(segment.changes)
            cut = int(steps[segment.start]) if segment.start > 0 else None
        self.n_changes += n_cuts
        first, last = int(run_numbers.min()), int(run_numbers.max())
        stale = self.staleness(self.runs - 1 - last, last - first + 1, len(steps), last + 1, changed=n_cuts > 0)
        return cut, n_cuts, stale

    def staleness(self, runs_ago: int, span: int, visits: int, before: int, changed: bool = True) -> float:
        """The weight left to the evidence of a kin group last seen `runs_ago` runs ago, whose `visits` steps
        spanned `span` runs, `before` runs having been recorded up to its last visit: 2^-(runs_ago /
        (half_life * gap)), its gap between visits being (span + before) / (visits + 1), one pseudo-visit spanning
        the record up to its last visit (not the absence being measured, or the gap would grow with it). The
        half-life is `stale_half_life` for a record with a change in it, `UNCHANGED_SLOWER` times that for one
        without."""
        if self.stale_half_life is None or runs_ago <= 0:
            return 1.0
        gap = max((span + before) / (visits + 1), 1.0)
        half_life = self.stale_half_life * (1.0 if changed else UNCHANGED_SLOWER)
        return float(2.0 ** (-runs_ago / (half_life * gap)))


def _kin_groups(table: dict[RawKey, _Trace]) -> dict[str, list[RawKey]]:
    """The cells of one action name by kin group: the grounding's objects in any order, in every situation (a road
    driven either way, in sun or rain), which breaks and recovers as one (`learning.action_model.kin_key`)."""
    groups: dict[str, list[RawKey]] = {}
    for key in table:
        try:
            objects = json.loads(key[0])
            kin = " ".join(sorted(str(o) for o in objects)) if isinstance(objects, list) else key[0]
        except ValueError:
            kin = key[0]
        groups.setdefault(kin, []).append(key)
    return groups
