"""The records that go in and come out of the trace store: pydantic models, because they cross the JSONL and
CLI boundaries and must reject bad input with a precise message.

One action spelling everywhere: a step names its action the way plans print it, `"action": "(pick-up b)"`, or
as name and arguments, `"action": "pick-up", "args": ["b"]`. Both are read into the same record (name and args),
so a runtime can hand each plan step back unchanged over HTTP, MCP, JSONL or Python; `StepRecord.ground` gives
the plan spelling back. Reading it lives here, in the one model every interface validates steps with, so no
interface can drift from the others.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# What SQLite's INTEGER holds: a larger step number was an OverflowError from the insert, a traceback that
# wrote none of the file's steps.
MAX_INTEGER = 2**63 - 1
# The longest run id kept: a run id is a key the client chooses, stored with every step, task source and episode
# of its run; unbounded, one 100,000-character id went into every row. 256 holds any UUID, URL-safe or
# path-like id an agent runtime makes.
MAX_RUN_ID = 256
# inf (`1e400` in a JSONL line) was stored, shown as `inf` by `traces stats` and exported as null.
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
FeatureValue = str | int | FiniteFloat | bool | None


class StepRecord(BaseModel):
    """One executed plan step, exactly as one line of a JSONL trace file:

    `{"run_id": "r1", "step": 0, "action": "drive", "args": ["t1", "a", "b"], "outcome": "success",
    "error": "...", "duration_ms": 12.5, "features": {"weather": "rain"}, "timestamp": "2026-01-01T00:00:00Z"}`

    `"action": "(drive t1 a b)"` (a plan step, as plans print it) is the same record; `args` may then be left
    out, or must say the same.

    `failure_category` follows the peers' taxonomy (transient / knowledge / infeasible) but any short string is
    kept; `side_effects` says a failure left the world changed (the agent loop sets it from the action's
    failure, `portfolio.agent.failures`);
    `expected_effects` / `observed_effects` are literals in PDDL form; `generation` is the adaptation
    generation the step belongs to. Unknown keys are rejected so that a typo does not silently drop data.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(
        min_length=1, max_length=MAX_RUN_ID, description="the run; with step, the step's identity (1-256 characters)"
    )
    step: int = Field(
        ge=0, le=MAX_INTEGER, description="0-based position in the run; (run_id, step) identifies the step"
    )
    action: str = Field(
        min_length=1, description='the action as plans spell it, "(pick-up b)", or its name alone ("pick-up") with args'
    )
    args: tuple[str, ...] = Field(default=(), description="the objects, when action is a name alone")
    outcome: Literal["success", "failure", "replan"]  # replan: the action ran and asked for a new plan
    error: str | None = None
    failure_category: str | None = None
    side_effects: bool | None = Field(
        default=None, description="a failure that changed the world before failing (an email sent); None: unknown"
    )
    duration_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    features: dict[str, FeatureValue] = Field(default_factory=dict)
    expected_effects: list[str] | None = None
    observed_effects: list[str] | None = None
    generation: int | None = Field(default=None, ge=0, le=MAX_INTEGER)
    timestamp: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _plan_spelling(cls, data: Any) -> Any:
        """`"action": "(drive t1 a b)"` -> `"action": "drive", "args": ["t1", "a", "b"]`."""
        if not isinstance(data, dict) or not isinstance(data.get("action"), str):
            return data
        text = data["action"].strip()
        if not text.startswith("("):
            return data
        name, args = split_ground(text)
        given = data.get("args")
        if given not in (None, (), []) and [str(a).lower() for a in given] != [a.lower() for a in args]:
            raise ValueError(
                f"action {text!r} names the arguments {list(args)} but args says {list(given)}: "
                "give the grounded action alone, or the name with args"
            )
        return {**data, "action": name, "args": args}

    @field_validator("action")
    @classmethod
    def _lower_action(cls, value: str) -> str:
        # PDDL names are case-insensitive; the planner speaks lower case (see portfolio.engine.results).
        if any(c.isspace() or c in "()" for c in value):
            raise ValueError(
                'an action name with args ("drive", ["t1", "a", "b"]) or a grounded '
                'action as plans spell it ("(drive t1 a b)")'
            )
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


def split_ground(text: str) -> tuple[str, tuple[str, ...]]:
    """`"(drive t1 a b)"` -> `("drive", ("t1", "a", "b"))`; ValueError (with what was expected) for anything
    that is not one flat parenthesised action. Kept here rather than borrowed from `domains` because the trace
    store depends on nothing else in the project."""
    inner = text.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        raise ValueError(f'{text!r} is not a grounded action like "(drive t1 a b)"')
    tokens = inner[1:-1].split()
    if not tokens or any("(" in t or ")" in t for t in tokens):
        raise ValueError(f'{text!r} is not a grounded action like "(drive t1 a b)" (one name, then objects)')
    return tokens[0], tuple(tokens[1:])


class RunRecord(BaseModel):
    id: str
    fingerprint: str | None = None
    domain: str | None = None  # the domain's fingerprint (schema 2; None in runs recorded before)
    goal: str | None = None
    started: str | None = None
    ended: str | None = None
    outcome: str | None = None


class ActionStats(BaseModel):
    """Per action name: how often it ran, how often it failed, how long it took (all steps, successes, failures)."""

    action: str
    steps: int
    failures: int
    failure_rate: float
    mean_duration_ms: float | None = None
    mean_success_ms: float | None = None
    mean_failure_ms: float | None = None


class StoredModel(BaseModel):
    """A serialized failure model as kept in the `models` table."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    version: int
    created: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    blob: bytes = Field(repr=False)
    tenant: str = "default"  # whose steps it was fit on (`traces.tenants`)
