"""Recency-weighted step counts, streamed: the sufficient statistics every part of the failure model is fit on.

A step's weight halves every `half_life` later steps of the same action name, so a repaired action recovers
after a run of successes. Weights are kept as 2^(k / half_life) for the k-th step of an action (growing, so an
old count never needs touching when a new step arrives) and rescaled by 2^-e whenever the exponent e passes 500,
which keeps them finite for any number of steps; `finish` scales them so the newest step weighs 1.

Counts are keyed by the raw JSON text of a step's arguments and features, so a million steps cost a million
dictionary updates and each distinct (arguments, features) is parsed once, later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RawKey = tuple[str, str]  # (args JSON, features JSON) as stored in the steps table

_RESCALE_AT = 500.0


@dataclass
class Counts:
    """Per action name, per raw key: [weighted steps, weighted failures, steps, failures]."""

    half_life: float | None
    cells: dict[str, dict[RawKey, list[float]]] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    _offset: dict[str, int] = field(default_factory=dict)
    finished: bool = False

    def add(self, action: str, key: RawKey, failed: bool) -> None:
        k = self.steps.get(action, 0)
        self.steps[action] = k + 1
        table = self.cells.get(action)
        if table is None:
            table = self.cells[action] = {}
        if self.half_life is None:
            weight = 1.0
        else:
            exponent = (k - self._offset.get(action, 0)) / self.half_life
            if exponent > _RESCALE_AT:
                self._scale(table, 2.0**-exponent)
                self._offset[action] = k
                exponent = 0.0
            weight = 2.0**exponent
        acc = table.get(key)
        if acc is None:
            acc = table[key] = [0.0, 0.0, 0, 0]
        acc[0] += weight
        acc[2] += 1
        if failed:
            acc[1] += weight
            acc[3] += 1

    @staticmethod
    def _scale(table: dict[RawKey, list[float]], factor: float) -> None:
        for acc in table.values():
            acc[0] *= factor
            acc[1] *= factor

    def finish(self) -> Counts:
        """Scale weights so that each action's newest step weighs 1 (call once, after the last `add`)."""
        if not self.finished and self.half_life is not None:
            for action, table in self.cells.items():
                newest = (self.steps[action] - 1 - self._offset.get(action, 0)) / self.half_life
                self._scale(table, 2.0**-newest)
        self.finished = True
        return self
