"""One run's process: `python -m portfolio.benchsuite.child` (started by `runner.execute`, never by hand).

Reads a `RunSpec` as JSON on stdin; writes `{"ready": true}` when set-up is done (the runner then starts the
hard budget's clock) and `{"result": {...}}` at the end, one line each, on the original stdout. File descriptor 1
is pointed at stderr first, so anything a planner prints cannot corrupt the channel. The plan is validated here
(`domains.validate`), outside the timed part, and only its length, cost and verdict travel back.

The process dies with the runner thread that started it (`portfolio.engine.limits.die_with_parent`:
PR_SET_PDEATHSIG on Linux; and an exit at start-up if the runner died before that was set), so a `kill -9` of the
runner does not leave runs planning on.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, TextIO

from portfolio.benchsuite import planners, suites
from portfolio.engine.limits import die_with_parent

PARENT_ENV = "PORTFOLIO_BENCH_PARENT"  # the runner's pid, set by runner.execute
SAMPLE_S = 0.1  # how often the planning process tree's memory is read: seldom, the thread shares the timed part's GIL


class TreeMemory:
    """The memory a planner adds while it plans: the peak, over samples every `SAMPLE_S`, of the resident memory
    of this process and every process below it, less this process's own when planning began (the interpreter
    and the imports every planner shares, ~150 MB), and at least the largest waited-for child's own peak
    (`RUSAGE_CHILDREN`: a search process, exact even when it lived between two samples)."""

    def __init__(self) -> None:
        import threading

        import psutil

        self._me = psutil.Process()
        self._base = self._me.memory_info().rss
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _tree_rss(self) -> int:
        import psutil

        total = 0
        for process in [self._me, *self._me.children(recursive=True)]:
            try:
                total += process.memory_info().rss
            except psutil.Error:  # ended between the listing and the read
                pass
        return total

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, self._tree_rss() - self._base)
            self._stop.wait(SAMPLE_S)

    def stop_kb(self) -> int:
        """Stop sampling; the planner's peak in KiB."""
        import resource

        self._stop.set()
        self._thread.join()
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
        return max(self._peak // 1024, children)


def exit_if_orphaned(parent: int | None) -> None:
    """With `parent` (the pid that started us), exit now if it is already gone: it may have died before
    `die_with_parent` made its request, and then the kernel never sends the signal."""
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def send(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def validate(task, plan: list[str]) -> dict[str, Any]:
    from domains.ground_text import parse_ground_action
    from domains.validate import validate_plan

    try:
        verdict = validate_plan(task, [parse_ground_action(step) for step in plan])
    except ValueError as error:
        return {"valid": False, "invalid_reason": str(error)}
    fields: dict[str, Any] = {"valid": verdict.ok, "plan_cost": verdict.cost if verdict.ok else None}
    if not verdict.ok:
        fields["invalid_reason"] = verdict.message
    return fields


def run(spec: dict[str, Any], channel: TextIO) -> dict[str, Any]:
    task_spec = suites.TaskSpec.model_validate(spec["task"])
    workdir = Path(spec["workdir"])
    record: dict[str, Any] = {}
    try:
        task = suites.load(task_spec)
    except Exception as error:  # the planner may still read what our parser cannot (validity then unknown)
        task = None
        record["load_error"] = f"{type(error).__name__}: {error}"
    if task is not None:
        record["size"] = len(task.problem.objects) + len(task.domain.constants)
    if task is None and not spec["planner"].startswith(("driver:", "up:")):
        record.update(status="error", reason=record["load_error"])
        return record
    domain_file, problem_file = (
        suites.files(task_spec, task, workdir)
        if task is not None
        else (Path(task_spec.domain_file or ""), Path(task_spec.problem_file or ""))
    )
    memory: list[TreeMemory] = []

    def ready() -> None:
        memory.append(TreeMemory())
        send(channel, {"ready": True})

    outcome = planners.run_planner(
        spec["planner"],
        task,
        domain_file,
        problem_file,
        spec["budget_s"],
        spec["decomposer_budget_s"],
        workdir,
        ready=ready,
    )
    if memory:
        record["peak_mem_kb"] = memory[0].stop_kb()
    record.update(planners.outcome_fields(outcome))
    if outcome.status == "solved":
        record["plan_length"] = len(outcome.plan)
        if task is not None:
            record.update(validate(task, outcome.plan))
        else:
            record["valid"] = None
    return record


def main() -> int:
    die_with_parent()
    exit_if_orphaned(int(os.environ.get(PARENT_ENV, "0")) or None)
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    spec = json.loads(sys.stdin.read())
    try:
        record = run(spec, channel)
    except Exception as error:
        traceback.print_exc()
        record = {"status": "error", "reason": f"{type(error).__name__}: {error}"}
    send(channel, {"result": record})
    return 0


if __name__ == "__main__":
    sys.exit(main())
