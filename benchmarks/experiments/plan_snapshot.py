"""Plan every committed test task and write what came back, one JSON line a call: a snapshot to compare a
refactor's behaviour with.

    PYTHONPATH=. python -m benchmarks.experiments.plan_snapshot OUT.jsonl [--limit N] [--task TEXT]
    PYTHONPATH=. python -m benchmarks.experiments.plan_snapshot --compare BEFORE.jsonl AFTER.jsonl

Tasks: every problem under `tests/data/ipc/<domain>/` with its `domain.pddl`, and the PDDL and JSON tasks of
`domains/examples/` (the `bad/` inputs left out). One warm `Planner()` (default cascade and settings, no trace
store) plans each task three ways:

- `blind`: `Planner.plan(task)`, the task's own costs (none on most tasks);
- `replan`: from the state after the first step of the `blind` plan (the cached translation with its initial
  state rewritten: the path of a replan, where small tasks are searched in this process);
- `costs`: the cascade with a fixed cost function (1 + a stable hash of the action's name modulo 5), quality
  "anytime": the cost-aware searches, in this process on small tasks.

Each line: {task, mode, status, cost, length, plan, delegate, search}; `cost` is the plan's cost under the costs it
was planned with (the cost function's for `costs`). `--compare` prints the calls whose status or cost differ
and the ones whose plan alone differs (searches that race may pick another plan of the same cost), and exits 1
when a status differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from domains.load import load_json_task, load_task
from domains.model import Task
from domains.validate import validate_plan
from portfolio.engine.results import PlanRequest, PlanResult
from portfolio.planner import Planner

ROOT = Path(__file__).resolve().parents[2]
IPC = ROOT / "tests" / "data" / "ipc"
EXAMPLES = ROOT / "domains" / "examples"


def tasks() -> Iterator[tuple[str, Task]]:
    """(label, task) for every committed IPC problem and example task, in a fixed order."""
    for folder in sorted(p for p in IPC.iterdir() if p.is_dir()):
        for problem in sorted(folder.glob("*.pddl")):
            if problem.name != "domain.pddl":
                yield f"ipc/{folder.name}/{problem.name}", load_task(folder / "domain.pddl", problem)
    yield "examples/delivery-1", load_task(EXAMPLES / "delivery-domain.pddl", EXAMPLES / "delivery-1.pddl")
    yield "examples/rooms/dark-c", load_task(EXAMPLES / "rooms" / "domain.pddl", EXAMPLES / "rooms" / "dark-c.pddl")
    yield "examples/blocks-task.json", load_json_task(EXAMPLES / "blocks-task.json")


def fixed_costs(grounded: Sequence[str]) -> dict[str, float]:
    """1 + a stable hash of each action's name modulo 5: costs that differ by action, the same in every run."""
    return {name: 1.0 + int(hashlib.sha256(name.encode()).hexdigest(), 16) % 5 for name in grounded}


def line(label: str, mode: str, result: PlanResult, costs: dict[str, float] | None = None) -> dict:
    """One snapshot line for `result`."""
    cost = result.cost
    if costs is not None and result.solved:
        cost = round(sum(costs[step] for step in result.plan), 6)
    search = next((a.details.get("search") for a in reversed(result.attempts) if a.delegate == result.delegate), None)
    return {
        "task": label,
        "mode": mode,
        "status": result.status.value,
        "cost": cost,
        "length": len(result.plan),
        "plan": result.plan,
        "delegate": result.delegate,
        "search": search,
    }


def snapshot(out: Path, limit: int | None, only: str | None = None) -> None:
    with Planner() as planner, out.open("w") as sink:
        for number, (label, task) in enumerate(tasks()):
            if limit is not None and number >= limit:
                break
            if only is not None and only not in label:
                continue
            started = time.monotonic()
            blind = planner.plan(task)
            rows = [line(label, "blind", blind)]
            if blind.solved and blind.plan:
                state = validate_plan(task, blind.actions()[:1]).final_state
                rows.append(line(label, "replan", planner.plan(task, init=state)))
            grounded: dict[str, float] = {}

            def cost_function(names: Sequence[str]) -> dict[str, float]:
                grounded.update(fixed_costs(names))
                return {name: grounded[name] for name in names}

            costs = planner.cascade.solve(PlanRequest(task=task, cost_function=cost_function, quality="anytime"))
            rows.append(line(label, "costs", costs, {**grounded, **fixed_costs(costs.plan)}))
            for row in rows:
                sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"{label}: {[r['status'] for r in rows]} {time.monotonic() - started:.1f} s", file=sys.stderr)


def compare(before: Path, after: Path) -> int:
    """Print the differences between two snapshots; 1 when a status differs."""
    read = lambda path: {(r["task"], r["mode"]): r for r in map(json.loads, path.read_text().splitlines())}  # noqa: E731
    old, new = read(before), read(after)
    status_changed = 0
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a is None or b is None:
            print(f"{key}: only in {'after' if a is None else 'before'}")
            continue
        if a["status"] != b["status"]:
            status_changed += 1
            print(f"{key}: STATUS {a['status']} -> {b['status']} ({a['delegate']} -> {b['delegate']})")
        elif a["cost"] != b["cost"]:
            print(f"{key}: COST {a['cost']} -> {b['cost']} (search {a['search']} -> {b['search']})")
        elif a["plan"] != b["plan"]:
            print(f"{key}: plan differs, same cost {a['cost']} (search {a['search']} -> {b['search']})")
        if a["delegate"] != b["delegate"]:
            print(f"{key}: delegate {a['delegate']} -> {b['delegate']}")
    print(f"{len(old)} calls before, {len(new)} after; {status_changed} statuses differ")
    return 1 if status_changed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="OUT.jsonl, or BEFORE.jsonl AFTER.jsonl with --compare")
    parser.add_argument("--compare", action="store_true", help="compare two snapshots instead of making one")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--task", default=None, metavar="TEXT", help="only the tasks whose label holds TEXT")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.paths)
    snapshot(args.paths[0], args.limit, args.task)
    return 0


if __name__ == "__main__":
    sys.exit(main())
