"""Differential validation: every plan the cascade returns, judged by the project's validator and by
unified-planning's `SequentialPlanValidator`, an independent implementation of the same semantics.

    PYTHONPATH=. python -m benchmarks.experiments.up_differential [--per-domain 5] [--budget 1] [SOURCE ...]

SOURCE is a benchmark folder or a pairs.txt (default: ../shared/ipc and ../shared/ipc-more/pairs.txt). For each
task the classical tier plans within the budget; the plan, and two broken variants of it (last step dropped,
one middle step dropped), go to both validators. Any disagreement (valid vs invalid, or a different plan cost)
is a bug in one of them and is printed with both messages; tasks UP cannot read (derived predicates) are
counted apart. Exits 1 on any disagreement. UP is slow (reading a task: up to 0.7 s), so this stays off the
planning path.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from domains.load import load_task
from domains.model import Plan, Task
from domains.up_bridge import up_validate
from domains.validate import validate_plan
from portfolio.benchsuite.suites import benchmark_pairs

DEFAULT_SOURCES = (Path("../shared/ipc"), Path("../shared/ipc-more/pairs.txt"))


@dataclass
class Verdict:
    task: str
    variant: str
    ours: bool
    theirs: bool | None  # None: UP cannot read or validate the task
    our_cost: float
    their_cost: float | None
    message: str

    @property
    def disagrees(self) -> bool:
        if self.theirs is None:
            return False
        if self.ours != self.theirs:
            return True
        return self.ours and self.their_cost is not None and abs(self.our_cost - self.their_cost) > 1e-6


def variants(plan: Plan) -> list[tuple[str, Plan]]:
    """The plan and two broken versions of it (each usually invalid: both validators must say so)."""
    out = [("plan", plan)]
    if plan:
        out.append(("without last step", plan[:-1]))
    if len(plan) > 2:
        middle = len(plan) // 2
        out.append(("without middle step", plan[:middle] + plan[middle + 1 :]))
    return out


def judge(task: Task, name: str, plan: Plan) -> list[Verdict]:
    verdicts = []
    for variant, steps in variants(plan):
        ours = validate_plan(task, steps)
        theirs = up_validate(task, steps)
        cost = ours.cost if task.problem.minimize_total_cost else float(len(steps))
        their_cost = theirs.cost if task.problem.minimize_total_cost else None
        message = f"ours: {ours.message or 'valid'} | UP: {theirs.message or ('valid' if theirs.valid else '')}"
        verdicts.append(Verdict(name, variant, ours.ok, theirs.valid, cost, their_cost, message))
        if theirs.valid is None:
            break  # UP cannot read this task: no point asking about the variants
    return verdicts


def run(pairs: list[tuple[str, Path, Path]], budget_s: float) -> list[Verdict]:
    from portfolio.delegates.registry import CLASSICAL_ONLY
    from portfolio.planner import Planner

    verdicts: list[Verdict] = []
    with Planner(CLASSICAL_ONLY, budget_s=budget_s) as planner:
        for label, domain, problem in pairs:
            task = load_task(domain, problem)
            result = planner.plan(task)
            if not result.solved:
                continue
            for verdict in judge(task, f"{label}/{problem.name}", result.actions()):
                verdicts.append(verdict)
                flag = "DISAGREE" if verdict.disagrees else ("UP-unread" if verdict.theirs is None else "agree")
                print(
                    f"{verdict.task:<55} {verdict.variant:<20} ours={verdict.ours!s:<5} "
                    f"UP={verdict.theirs!s:<5} {flag}",
                    flush=True,
                )
                if verdict.disagrees:
                    print(f"    {verdict.message} (cost ours {verdict.our_cost}, UP {verdict.their_cost})", flush=True)
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="*", type=Path, default=list(DEFAULT_SOURCES))
    parser.add_argument("--per-domain", type=int, default=5)
    parser.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="seconds per task (default 5: the plans, not the speed, are under test)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    pairs = [p for source in args.sources for p in benchmark_pairs(source, args.per_domain)]
    verdicts = run(pairs, args.budget)
    plans = [v for v in verdicts if v.variant == "plan"]
    unread = sum(v.theirs is None for v in plans)
    bad = [v for v in verdicts if v.disagrees]
    print(f"{len(plans)} plans ({unread} in tasks UP cannot read), {len(verdicts)} verdicts, {len(bad)} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
