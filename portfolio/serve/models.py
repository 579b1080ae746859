"""The service's wire models: what /v1/* and the MCP tools take and return (pydantic, so FastAPI and the MCP SDK
publish their JSON Schemas).

Plan results keep the shape of `portfolio plan --json` (`PlanResult`); the service only adds `run_id`, the key
for /v1/replan and for steps. `PlanBody` is meant to grow: every field that `Planner.plan` also takes by name
(`features`, `explore`, ...) is handed to it unchanged by the planner worker, so a new
planning option needs one field here and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_serializer

from learning.explore import Policy, renamed
from portfolio.delegates.fast_downward.searches import QUALITIES
from portfolio.engine.results import PlanResult
from traces.records import MAX_RUN_ID, ActionStats, StepRecord

JobStatus = Literal["running", "done", "failed"]


class BadRequest(Exception):
    """Input the service cannot use: answered `status` (400, or 422 for input well formed but too costly to
    handle) with the message and `kind`."""

    def __init__(self, message: str, kind: str = "BadRequest", status: int = 400) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


Quality = Literal[QUALITIES]  # type: ignore[valid-type]  # the search qualities, one list (searches)
QUALITY_HELP = (
    "with costs: anytime (the cheapest plan found once optimality is proved or a quarter of the "
    "search's time has passed), optimal (wait for the proof), first (the first cost-aware plan); "
    "default: the server's"
)
# The explore policies (`learning.explore`); the old names `mean` and `ucb` are accepted and mapped, with a
# warning, so the schema lists only the policies.
ExplorePolicy = Annotated[Policy, BeforeValidator(lambda v: renamed(v) if isinstance(v, str) else v)]
EXPLORE_HELP = (
    "how learned costs explore: cautious (the mean p_fail plus one posterior standard deviation where the action "
    "has steps of its own; planned once more under a draw when a step is believed to fail more often than not), "
    "thompson (a draw per call) or optimistic (its 10% quantile); the old names mean "
    "and ucb still work; default: the server's"
)
WEIGHT_HELP = "lambda of learned costs, cost = base + weight * -log(1 - p_fail); default: the server's"
OBJECTIVE_HELP = (
    "what learned costs price: risk (base + weight * -log(1 - p_fail)) or time (a step's expected ms to success, "
    "transient failures retried, plan-ending ones costing a replan); default: the server's"
)


def _ground_action(text: str) -> str:
    """A grounded action in the form plans print it (`"Book-Flight"` and `"(book-flight)"` are one action);
    ValueError (a `PDDLSyntaxError`) for anything else."""
    from domains.ground_text import ground_action_text

    return ground_action_text(text)


GroundActionText = Annotated[str, AfterValidator(_ground_action)]
# Steps of a plan a client sends to be kept: a replan simulates each suffix until one is valid, so a plan's length
# is paid for about squarely; the plans planners make here are far shorter.
MAX_PLAN_STEPS = 10_000
MAX_IDEMPOTENCY_KEY = 256  # a UUID, a hash or a client's own composite key
IdempotencyKey = Annotated[str, Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY)]
IDEMPOTENCY_HELP = (
    "a key the client makes for this batch of steps (a UUID, say; 1-256 characters): the same batch again under it "
    "writes nothing and gets the first answer, across restarts; other steps under it are refused (422 "
    "IdempotencyKeyReused)"
)


class TaskSource(BaseModel):
    """A task: PDDL `domain` and `problem` texts, or `task` in the JSON task format (`portfolio schema task`)."""

    model_config = ConfigDict(extra="forbid")

    domain: str | None = Field(default=None, description="PDDL domain text")
    problem: str | None = Field(default=None, description="PDDL problem text")
    task: dict[str, Any] | None = Field(default=None, description="a JSON task instead of PDDL texts")


class PlanOptions(BaseModel):
    """How to plan, as a plan request and a replan request both say it (`PlanArgs`, `ReplanArgs`): a planning
    option added here reaches both."""

    model_config = ConfigDict(extra="forbid")

    excluded: list[str] = Field(default_factory=list, description="grounded actions no plan may use")
    critiques: list[str] = Field(default_factory=list, description="reasons earlier plans failed (for an LLM)")
    features: dict[str, Any] | None = Field(default=None, description="the situation, for learned costs")
    explore: ExplorePolicy | None = Field(default=None, description=EXPLORE_HELP)
    quality: Quality | None = Field(default=None, description=QUALITY_HELP)
    weight: float | None = Field(default=None, ge=0, allow_inf_nan=False, description=WEIGHT_HELP)
    objective: Literal["risk", "time"] | None = Field(default=None, description=OBJECTIVE_HELP)
    budget: float | None = Field(default=None, gt=0, description="classical tier seconds (capped by the server)")


class PlanArgs(PlanOptions, TaskSource):
    """What a plan request says, over HTTP (`PlanBody`) and as the MCP `plan` tool's arguments."""

    init: list[str] | None = Field(default=None, description='plan from this state: atoms like "(on a b)"')
    run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_RUN_ID,
        description="record the plan under this run (1-256 characters)",
    )


class PlanBody(PlanArgs):
    wait: bool = Field(default=True, description="false: answer 202 with a job id at once")


class ReplanArgs(PlanOptions):
    """Plan again for the task of an earlier run, from the state the runtime observed (HTTP `ReplanBody`, the
    MCP `replan` tool's arguments).

    What is still valid of the plan being executed is kept (`plan-reuse`), but never a step that ran: by default
    the plan is the run's as the service handed it out, less the steps recorded for the run since
    (`portfolio.serve.runs.executed_prefix` says which count); a runtime that keeps its own state sends
    `previous_plan` (the rest of its plan) instead, and may name its steps that ran in `executed`."""

    run_id: str = Field(min_length=1, max_length=MAX_RUN_ID, description="the run_id of an earlier /v1/plan answer")
    state: list[str] = Field(description='the observed state: every true atom, like "(on a b)"')
    previous_plan: list[GroundActionText] | None = Field(
        default=None,
        max_length=MAX_PLAN_STEPS,
        description="the plan the runtime is executing, its steps not executed yet (or the whole plan, with "
        "`executed`; up to 10,000 steps): kept where still valid instead of the run's plan as the service keeps "
        "it; those steps are the runtime's word, recorded steps are not matched against them. Default: the plan "
        "the service last handed out for the run, less the steps recorded for the run since",
    )
    previous_cost_model: str | None = Field(
        default=None,
        max_length=256,
        description="the cost_model of the answer previous_plan came from: a plan made under other costs is "
        "planned anew (omitted: the caller vouches for it)",
    )
    executed: list[GroundActionText] = Field(
        default_factory=list,
        max_length=MAX_PLAN_STEPS,
        description="steps of that plan (previous_plan, else the run's) that ran, in order, as plans spell them: "
        "they and everything before them are never handed back (with the steps recorded for the run)",
    )


class ReplanBody(ReplanArgs):
    wait: bool = True


class CostsBody(TaskSource):
    """What the learned costs of a task's grounded actions are (as `portfolio costs`)."""

    init: list[str] | None = Field(default=None, description='from this state: atoms like "(on a b)"')
    features: dict[str, Any] | None = Field(default=None, description="the situation, for learned costs")
    weight: float | None = Field(default=None, ge=0, allow_inf_nan=False, description=WEIGHT_HELP)
    objective: Literal["risk", "time"] | None = Field(default=None, description=OBJECTIVE_HELP)


class ActionCostInfo(BaseModel):
    action: str = Field(description='the grounded action, as plans spell it: "(pick-up b)"')
    base_cost: float = Field(description="the task's own cost of the action")
    p_fail: float = Field(description="the model's posterior mean probability that it fails")
    cost: float = Field(description="what plans pay for it: base + weight * -log(1 - p_fail), or expected_ms / 1000")
    expected_ms: float | None = Field(
        default=None, description="objective time only: expected ms to success, retries and replans included"
    )
    charge: float = Field(
        default=0.0, description="what the explore policy added to the cost at the mean p_fail (cost units)"
    )
    p_fail_90: tuple[float, float] | None = Field(default=None, description="a 90% credible interval of p_fail")
    steps: int = Field(default=0, description="steps of this grounded action recorded, ever (in this situation)")
    failures: int = Field(default=0, description="of which failed")
    since_change: int = Field(default=0, description="steps since its failure rate last changed: what p_fail rests on")
    failures_since: int = Field(default=0, description="of which failed")
    runs_ago: int | None = Field(default=None, description="runs recorded since it was last seen (None: never seen)")
    last_seen: str | None = Field(default=None, description="its newest step's timestamp, where steps carry one")
    shared_change: float = Field(
        default=0.0,
        description="probability that it shares a change of failure rate that an action alike but for one object "
        "showed (a road that broke for another van), which p_fail mixes in; 0 where none did",
    )

    @model_serializer(mode="wrap")
    def _without_time(self, handler: Any) -> Any:
        """Under the risk objective the row is as it always was, over HTTP and MCP alike: no expected_ms."""
        row = handler(self)
        if isinstance(row, dict) and row.get("expected_ms") is None:
            row.pop("expected_ms", None)
        return row


class CostsResponse(BaseModel):
    model_version: int | None = Field(description="the failure model the costs come from (None: no model yet)")
    costs: list[ActionCostInfo] = Field(description="every grounded action, riskiest first; empty without a model")


@dataclass
class PlanResponse(PlanResult):
    """A `PlanResult` with the run's id."""

    run_id: str | None = field(default=None, metadata={"description": "pass to /v1/replan and with the executed steps"})


class StepsBody(BaseModel):
    """Executed steps to record. With an idempotency key (this field, or HTTP's `Idempotency-Key` header), the
    batch is recorded once and a retry of it answered as the first time; other steps under a used key are
    refused (422 `IdempotencyKeyReused`)."""

    model_config = ConfigDict(extra="forbid")

    steps: list[StepRecord]
    idempotency_key: IdempotencyKey | None = Field(default=None, description=IDEMPOTENCY_HELP)


def one_idempotency_key(in_body: str | None, in_header: str | None) -> str | None:
    """The batch's idempotency key: the body's `idempotency_key` or HTTP's `Idempotency-Key` header; `BadRequest`
    when both are given and differ."""
    if in_body is not None and in_header is not None and in_body != in_header:
        raise BadRequest("the Idempotency-Key header and the body's idempotency_key differ: give one, or the same")
    return in_header if in_header is not None else in_body


class StepConflictInfo(BaseModel):
    """A step not recorded because its (run_id, step) is already recorded with other content."""

    run_id: str
    step: int
    index: int = Field(description="its position in the posted steps, from 0")
    fields: list[str] = Field(description="the fields that differ from the recorded step")
    message: str


class StepsResponse(BaseModel):
    """A step is identified by (run_id, step): posting it again changes nothing (`skipped`); one with that id
    and other content is not recorded but listed in `conflicts`."""

    recorded: int = Field(description="new steps written")
    skipped: int = Field(default=0, description="steps already recorded exactly so (a retried post)")
    conflicts: list[StepConflictInfo] = Field(default_factory=list)

    @classmethod
    def of(cls, report: Any) -> StepsResponse:
        """From the store's `traces.RecordReport`."""
        conflicts = [
            StepConflictInfo(run_id=c.run_id, step=c.step, index=c.index, fields=list(c.fields), message=str(c))
            for c in report.conflicts
        ]
        return cls(recorded=report.recorded, skipped=report.skipped, conflicts=conflicts)


class ValidateBody(TaskSource):
    plan: list[str] = Field(description='grounded actions in order, like "(pick-up a)"')
    init: list[str] | None = Field(default=None, description="check from this state instead of the task's")


class Verdict(BaseModel):
    """The validator's verdict. `failed_step` is 1-based; `problem` is one of unknown-action, wrong-arity,
    unknown-object, wrong-type, precondition, goal; `missing` lists the literals that did not hold."""

    valid: bool
    steps: int
    cost: float
    failed_step: int | None = None
    problem: str = ""
    message: str = ""
    missing: list[str] = Field(default_factory=list)


class ActionInfo(ActionStats):
    p_fail: float | None = Field(default=None, description="failure probability under the latest model")


class ActionsResponse(BaseModel):
    model_version: int | None = None
    actions: list[ActionInfo]


class RetrainBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    half_life: float = Field(default=5000.0, gt=0, description="steps after which a step's weight halves")
    prior_mean: float = Field(default=0.05, gt=0, lt=1)
    prior_strength: float = Field(default=10.0, gt=0)
    include_held: bool = Field(
        default=False,
        description="fit the steps the poison guard held back at the last retrain too (scope `admin`): a retrain "
        "of its own, not joined to one running",
    )


class Job(BaseModel):
    id: str
    kind: Literal["plan", "replan", "retrain"]
    status: JobStatus = "running"
    result: dict[str, Any] | None = None
    error: str | None = None
    created: float
    finished: float | None = None


class HealthResponse(BaseModel):
    status: Literal["ok", "degraded"] = "ok"
    reasons: list[str] = Field(default_factory=list, description="why the status is degraded")
    workers: int
    ready: int = Field(description="workers whose planner has started and answered")
    busy: int
    queued: int
    traces: bool


class ErrorBody(BaseModel):
    error: str
    kind: str


# Parentheses inside each other in a PDDL text. The parser, the translator and the validator recurse on
# formulas; 5,000 nested `(and` was a RecursionError (a 500). Real domains nest under 20.
MAX_PDDL_DEPTH = 100


def check_pddl_nesting(text: str, where: str, limit: int = MAX_PDDL_DEPTH) -> None:
    """`PDDLSyntaxError` naming the line when parentheses nest deeper than `limit` (comments skipped)."""
    import re
    from itertools import accumulate

    from domains.errors import PDDLSyntaxError

    parens = re.sub(r"[^()\n]+", "", re.sub(r";[^\n]*", "", text))
    depth = line = 0
    for depth, char in zip(accumulate(1 if c == "(" else -1 if c == ")" else 0 for c in parens), parens):
        line += char == "\n"
        if depth > limit:
            raise PDDLSyntaxError(
                f"parentheses nested deeper than {limit} levels; expected a flatter formula", file=where, line=line + 1
            )


def load_task(source: TaskSource):
    """The `domains.model.Task` a request names; raises `TaskInputError` (bad PDDL or JSON) or `BadRequest`."""
    from domains.json_task import task_from_json
    from domains.pddl import parse_task

    if source.task is not None:
        if source.domain is not None or source.problem is not None:
            # the JSON task was used and the PDDL ignored without a word; `portfolio plan` refuses both too
            raise BadRequest('give "domain" and "problem" (PDDL texts) or "task" (a JSON task), not both')
        return task_from_json(json.dumps(source.task), "request.task")
    if source.domain and source.problem:
        check_pddl_nesting(source.domain, "request.domain")
        check_pddl_nesting(source.problem, "request.problem")
        return parse_task(source.domain, source.problem, "request.domain", "request.problem")
    raise BadRequest('give "domain" and "problem" (PDDL texts) or "task" (a JSON task)')
