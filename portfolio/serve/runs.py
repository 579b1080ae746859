"""What the service remembers of each run, for `/v1/replan` and the MCP `replan` tool: its task (a replan
sends only the run id and the observed state), the worker that planned it (its caches know the task) and its
current plan with the cost model it was made under (a replan keeps what is still valid: `plan-reuse`); and which
steps of that plan ran (`executed_prefix`), which a replan never hands back.

Bounded: the `MAX_RUNS` most recent runs; their task texts shared per task (runs of one task keep one copy) and
at most `MAX_SOURCES` tasks and `MAX_SOURCE_CHARS` characters in all, the oldest going first but never the one
just planned. Beyond that the trace store keeps task sources across restarts (`traces.task_sources`), and with
them each run's plan and the steps recorded since (`traces.run_plans`). A run id is an opaque string here.
"""

from __future__ import annotations

import bisect
import collections
import json
from collections.abc import Iterable, Sequence
from typing import Any

from traces.records import StepRecord
from traces.run_plans import keep_run_plan, run_plan, steps_since
from traces.store import TraceStore
from traces.task_sources import remember_task_source, source_key

MAX_RUNS = 4096
MAX_SOURCES = 256  # task texts kept for replanning (a large PDDL problem is ~100 KB)
# ... and their characters in all: 256 bodies at the 32 MB limit would otherwise be 8 GB of one server's memory
MAX_SOURCE_CHARS = 64 * 1024 * 1024


class RunMemory:
    def __init__(self) -> None:
        self.runs: collections.OrderedDict[str, tuple[str, int]] = collections.OrderedDict()  # -> (task, worker)
        self.plans: collections.OrderedDict[str, tuple[list[str], str | None]] = collections.OrderedDict()
        self.sources: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._chars: dict[str, int] = {}  # task key -> characters of its texts (for MAX_SOURCE_CHARS)

    def remember(self, run_id: str, source: dict[str, Any], worker: int) -> dict[str, Any] | None:
        """Keep the run's task source (`domain`, `problem`, `task`) and worker. Returns the source when the run is
        new or now names another task (for the trace store to keep), else None."""
        key = source_key(source)  # the trace store's key too (`traces.task_sources`)
        known = self.runs.get(run_id)
        self.sources[key] = source
        self.sources.move_to_end(key)
        self._chars[key] = sum(len(source.get(k) or "") for k in ("domain", "problem")) + (
            len(json.dumps(source["task"])) if source.get("task") else 0
        )
        self.runs[run_id] = (key, worker)
        self.runs.move_to_end(run_id)
        while len(self.runs) > MAX_RUNS:
            self.runs.popitem(last=False)
        while len(self.sources) > 1 and (
            len(self.sources) > MAX_SOURCES or sum(self._chars.values()) > MAX_SOURCE_CHARS
        ):
            oldest, _ = self.sources.popitem(last=False)
            self._chars.pop(oldest, None)
        return source if known is None or known[0] != key else None

    def keep_plan(self, run_id: str, plan: list[str], cost_model: str | None) -> None:
        """The run's current plan (the last one planned or kept for it) and the cost model it was made under."""
        self.plans[run_id] = (list(plan), cost_model)
        self.plans.move_to_end(run_id)
        while len(self.plans) > MAX_RUNS:
            self.plans.popitem(last=False)

    def plan(self, run_id: str) -> tuple[list[str], str | None] | None:
        return self.plans.get(run_id)

    def task(self, run_id: str) -> tuple[dict[str, Any], int] | None:
        """The run's task source and worker, if still in memory."""
        entry = self.runs.get(run_id)
        source = self.sources.get(entry[0]) if entry is not None else None
        return (source, entry[1]) if entry is not None and source is not None else None


def store_run(
    store: TraceStore, run_id: str, source: dict[str, Any] | None, plan: list[str] | None, cost_model: str | None
) -> None:
    """Keep in the trace store the run's task source (`source`: when new to this server, else None) and the plan
    just handed out for it (`traces.run_plans`)."""
    if source is not None:
        remember_task_source(store, run_id, source)
    if plan is not None:
        keep_run_plan(store, run_id, plan, cost_model)


def stored_run(store: TraceStore, run_id: str) -> tuple[tuple[list[str], str | None] | None, list[StepRecord]]:
    """The run's plan kept in the trace store with its cost model (None: none kept), and the steps recorded for
    the run since that plan was handed out."""
    kept = run_plan(store, run_id)
    if kept is None:
        return None, []
    return (list(kept.plan), kept.cost_model), steps_since(store, run_id, kept.first_step)


def ran(steps: Iterable[StepRecord]) -> list[str]:
    """The grounded actions (as plans spell them) of the recorded `steps` that ran, in the order given: a
    success; a `replan` step (it ran, then asked for a new plan); a failure with `side_effects` (it changed the
    world before failing: handing it back would repeat what it did, which is why the agent loop never retries
    one either). A failure without side effects (false, or unknown) did not run: its effects did not happen, so
    the plan from that step on may still be kept, a retry of the step."""
    return [step.ground for step in steps if step.outcome != "failure" or step.side_effects]


def executed_prefix(plan: Sequence[str], actions: Iterable[str]) -> int:
    """How many leading steps of `plan` ran, given the `actions` that ran since it was handed out, in order (as
    plans spell them; `ran`). Walking `actions`, each is matched to the plan's first step with that action after
    the steps matched so far; the executed prefix ends at the last step matched. Steps are matched by action,
    not by step number: a run's steps are numbered along the run, every attempt included, so after a retried
    step the numbers run ahead of the plan, and a number would mark a step that has not run as executed. A
    skipped step ends inside the prefix; an action the rest of the plan does not hold (one of the runtime's
    own, or a repeat) matches nothing.

    A replan keeps at most the plan after this prefix (`steps_to_keep`): every step matched is behind it, so a
    step that ran is never handed back, even when the observed state satisfies its precondition again (typed
    actions do not consume their inputs: from the state after `send-approval-email`, `receive-approval` and
    `book-flight`, the whole plan is valid again). A prefix matched too far (an action of the runtime's own that
    the plan holds later) costs only the reuse: what is kept must still be valid from the observed state, else
    the cascade plans anew."""
    at: dict[str, list[int]] = {}  # each action's positions in the plan, ascending
    for position, step in enumerate(plan):
        at.setdefault(step, []).append(position)
    done = 0
    for action in actions:  # a bisection each: a long `executed` against a long plan stays cheap
        positions = at.get(action, [])
        later = bisect.bisect_left(positions, done)
        if later < len(positions):
            done = positions[later] + 1
    return done


def steps_to_keep(
    request: Any, kept: tuple[list[str], str | None] | None, recorded: Sequence[StepRecord]
) -> tuple[list[str], str | None] | None:
    """What a replan `request` (`ReplanArgs`) may keep of the plan being executed, with the cost model it was
    made under (`Planner.plan(previous_plan=, previous_cost_model=)`: what is still valid from the observed state
    is kept, `plan-reuse`); None when there is no plan to offer.

    The plan is the client's `previous_plan` when it sends one (a runtime that keeps its own state; its cost
    model is `previous_cost_model`), else `kept`, the run's plan as the service last handed it out, and
    `recorded`, the steps recorded for the run since. What ran is cut off first: the plan's executed prefix
    (`executed_prefix`) by the client's `executed` steps and, for the run's own plan, by the recorded steps
    that ran (`ran`), whichever reaches further. So no step that ran is handed back, even when the observed
    state makes it applicable again, while a step that failed without side effects may be (a retry). The
    client's own plan is its word on what is left: recorded steps are not matched against it, since the
    service cannot know where it begins. Without a trace store nothing is recorded: only `executed` says."""
    if request.previous_plan is not None:
        plan, cost_model, actions = list(request.previous_plan), request.previous_cost_model, []
    elif kept is not None:
        (plan, cost_model), actions = kept, ran(recorded)
    else:
        return None
    done = max(executed_prefix(plan, actions), executed_prefix(plan, request.executed))
    return plan[done:], cost_model
