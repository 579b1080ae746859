"""The trace store's part in following a run (beside `traces.task_sources`): the plan the service last handed out
for each run, and the steps recorded for the run since, so that `/v1/replan` (and the MCP `replan` tool) knows
which of the plan's steps ran, after a restart or on another service sharing the file too.

    keep_run_plan(store, run_id, ["(send-approval-email)", ...], "task")   # -> RunPlan(plan, cost_model, first_step)
    run_plan(store, run_id)                                               # the same RunPlan, or None
    steps_since(store, run_id, plan.first_step)                           # the steps recorded for it since

A run is one opaque string here, compared whole: whatever a server makes of a client's run id (qualifying it, say)
happens before it gets here. One row a run (`run_plans`), replaced by each new plan; `first_step` is the step
number the plan's first step takes: one past the highest step recorded for the run when the plan was kept, since
a run's steps are numbered along the run, across its plans (the agent loop numbers every attempt). The rows of
runs whose task `traces.task_sources` prunes go with it. Functions, not `TraceStore` methods, like
`traces.task_sources`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from traces.records import StepRecord
from traces.store import TraceStore, _now

STEP_FIELDS = ("action", "args", "outcome", "side_effects")


@dataclass(frozen=True)
class RunPlan:
    """The plan kept for a run: its steps as plans spell them, the cost model it was made under (None: unknown)
    and the step number its first step takes."""

    plan: tuple[str, ...]
    cost_model: str | None
    first_step: int


def keep_run_plan(store: TraceStore, run_id: str, plan: list[str], cost_model: str | None) -> RunPlan:
    """Keep `plan` as the run's plan from now on (one transaction), its first step numbered after every step
    recorded for the run so far."""

    def body() -> RunPlan:
        first = store.db.execute("SELECT coalesce(max(step) + 1, 0) FROM steps WHERE run_id = ?", [run_id]).fetchone()[
            0
        ]
        store.db.execute(
            "INSERT INTO run_plans (run_id, plan, cost_model, first_step, updated) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET plan = excluded.plan, cost_model = excluded.cost_model, "
            "first_step = excluded.first_step, updated = excluded.updated",
            [run_id, json.dumps(list(plan)), cost_model, first, _now()],
        )
        return RunPlan(tuple(plan), cost_model, int(first))

    return store._write(body)


def run_plan(store: TraceStore, run_id: str) -> RunPlan | None:
    """The plan kept for `run_id`, or None when none is."""
    sql = "SELECT plan, cost_model, first_step FROM run_plans WHERE run_id = ?"
    rows = store._retry(lambda: store.db.execute(sql, [run_id]).fetchall())
    return RunPlan(tuple(json.loads(rows[0][0])), rows[0][1], int(rows[0][2])) if rows else None


def steps_since(store: TraceStore, run_id: str, first_step: int) -> list[StepRecord]:
    """The steps recorded for `run_id` numbered `first_step` or later, by step number (only `STEP_FIELDS` and
    the identity are read; a step doubled by an import before schema 4 counts once)."""
    sql = (
        f"SELECT run_id, step, {', '.join(STEP_FIELDS)} FROM steps "
        "WHERE run_id = ? AND step >= ? AND copy = 0 ORDER BY step"
    )
    rows = store._retry(lambda: store.db.execute(sql, [run_id, first_step]).fetchall())
    return [
        StepRecord(
            run_id=run,
            step=step,
            action=action,
            args=tuple(json.loads(args)),
            outcome=outcome,
            side_effects=None if side_effects is None else bool(side_effects),
        )  # fmt: skip
        for run, step, action, args, outcome, side_effects in rows
    ]
