"""The records that go in and come out of the trace store: pydantic models, because they cross the JSONL and
CLI boundaries and must reject bad input with a precise message."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

FeatureValue = str | int | float | bool | None


class StepRecord(BaseModel):
    """One executed plan step, exactly as one line of a JSONL trace file:

    `{"run_id": "r1", "step": 0, "action": "drive", "args": ["t1", "a", "b"], "outcome": "success",
    "error": "...", "duration_ms": 12.5, "features": {"weather": "rain"}, "timestamp": "2026-01-01T00:00:00Z"}`

    `failure_category` follows the peers' taxonomy (transient / knowledge / infeasible) but any short string is
    kept; `expected_effects` / `observed_effects` are literals in PDDL form; `generation` is the adaptation
    generation the step belongs to. Unknown keys are rejected so that a typo does not silently drop data.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(min_length=1)
    step: int = Field(ge=0)
    action: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    outcome: Literal["success", "failure", "replan"]  # replan: the action ran and asked for a new plan
    error: str | None = None
    failure_category: str | None = None
    duration_ms: float | None = Field(default=None, ge=0)
    features: dict[str, FeatureValue] = Field(default_factory=dict)
    expected_effects: list[str] | None = None
    observed_effects: list[str] | None = None
    generation: int | None = Field(default=None, ge=0)
    timestamp: datetime | None = None

    @field_validator("action")
    @classmethod
    def _lower_action(cls, value: str) -> str:
        # PDDL names are case-insensitive; the planner speaks lower case (see portfolio.results).
        if any(c.isspace() or c in "()" for c in value):
            raise ValueError("an action name without spaces or parentheses, e.g. 'drive'")
        return value.lower()

    @field_validator("args")
    @classmethod
    def _lower_args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(a.lower() for a in value)

    @property
    def failed(self) -> bool:
        return self.outcome == "failure"

    @property
    def ground(self) -> str:
        """The grounded action in PDDL form, e.g. `(drive t1 a b)`."""
        return "(" + " ".join((self.action, *self.args)) + ")"


class RunRecord(BaseModel):
    id: str
    fingerprint: str | None = None
    domain: str | None = None  # the domain's fingerprint (schema 2; None in runs recorded before)
    goal: str | None = None
    started: str | None = None
    ended: str | None = None
    outcome: str | None = None


class ActionStats(BaseModel):
    """Per action name: how often it ran, how often it failed, how long it took."""

    action: str
    steps: int
    failures: int
    failure_rate: float
    mean_duration_ms: float | None = None


class StoredModel(BaseModel):
    """A serialized failure model as kept in the `models` table."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    version: int
    created: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    blob: bytes = Field(repr=False)
