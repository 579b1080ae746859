"""Does the plan a user gets respect the costs? Plan cost against the optimum, and latency, per search quality.

    python -m benchmarks.experiments.cost_search                           # held-out seeds 100-119, every family
    python -m benchmarks.experiments.cost_search --first-seed 0 --seeds 3 --families
    logistics-large,tools-large,ipc-costs \
        --qualities first,anytime --improve-share 0.25     # the tuning run IMPROVE_SHARE was chosen on
    python -m benchmarks.experiments.cost_search --families tools,delivery --qualities anytime --out /tmp/cs

What runs: the default cascade, warm, as `Planner` runs it (`Planner().cascade.solve` with a cost model: the
very call `Planner.plan` makes with learned costs), with `quality` first / anytime / optimal. Costs are
learned-cost shaped, base + 5 * -log(1 - p) per grounded action, p drawn per (seed, action): 85% of actions
fail ~3% (Beta(1, 30)), 15% fail 30-90%. IPC tasks with action costs plan on their own costs.

The oracle: the optimum under the same costs, from Fast Downward's A* with LM-cut alone (the learning
benchmark's `ExactSearch`, 30 s); a task whose optimum is not proved in that time is reported (`unproved`) and
left out of the ratios.

Families (several sizes each, every seed a different cost draw): the bundled `tools`, `logistics`,
`blocksworld`, `gripper` domains; `delivery` (load, drive, unload on a ring of 5-8 places with chords and a
direct road between the two sites); `ipc-costs` (the smallest problems of the IPC action-cost domains in
../shared/ipc, their own costs, one seed: the costs do not vary); `ipc-more-costs` (the smallest problem of
each action-cost domain of ../shared/ipc-more, held out of choosing the anytime share).

Reported per family and quality: the returned plan's cost / the optimum (median, p95, max), the share of calls
that proved optimality, latency (median, p95, max) and, for the families planned without costs of their own,
the median warm latency with costs over the cost-blind warm call on the same task (target <= 2x). `> 1 s` counts
the calls that took longer than the classical tier's budget (the cascade then went on: carried-over work, the
decomposer tier), `> budget` those past the whole cascade's budget (1 s + 30 s): 0 is the target.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

SHARED_IPC = Path(__file__).resolve().parents[3] / "shared" / "ipc"
FAMILIES = (
    "tools",
    "logistics",
    "blocksworld",
    "gripper",
    "delivery",
    "logistics-large",
    "tools-large",
    "ipc-costs",
    "ipc-more-costs",
)
SIZES = {
    "tools": (1, 2, 3, 4),
    "logistics": (1, 2, 3),
    "blocksworld": (4, 5, 6),
    "gripper": (2, 3, 4),
    "delivery": (5, 6, 8),
    "logistics-large": (4, 5),
    "tools-large": (6, 8),
}
IPC_COST_DOMAINS = ("elevators-sat08-strips", "transport-sat08-strips", "barman-sat11-strips")
# Held out of choosing IMPROVE_SHARE: the action-cost domains of ../shared/ipc-more (the smallest problem of each
# in pairs.txt), less labyrinth (minutes to translate, FIELD-NOTES) and the flashfill/recharging variants whose
# domain file differs per problem (read from pairs.txt as well).
IPC_MORE_COST_DOMAINS = (
    "agricola-sat18-strips",
    "cavediving-14-adl",
    "citycar-sat14-adl",
    "data-network-sat18-strips",
    "floortile-sat14-strips",
    "folding-sat23-adl",
    "pegsol-sat11-strips",
    "ricochet-robots-sat23-adl",
    "settlers-sat18-adl",
    "spider-sat18-strips",
    "tetris-sat14-strips",
)
QUALITIES = ("first", "anytime", "optimal")
BUDGET_S = 1.0
CASCADE_S = 31.0  # the default cascade: 1 s classical + 30 s decomposer tier


def delivery_task(places: int, seed: int):
    """A ring of `places` places plus a few chords and a direct road between the two sites p0 and p{n/2}; two
    trucks and two packages at p0, both wanted at the far site."""
    from domains.pddl import parse_task
    from portfolio.benchsuite.worlds.delivery import DOMAIN as DELIVERY_DOMAIN

    rng = random.Random(f"delivery:{places}:{seed}")
    names = [f"p{i}" for i in range(places)]
    roads = {tuple(sorted((names[i], names[(i + 1) % places]))) for i in range(places)}
    roads.add(tuple(sorted((names[0], names[places // 2]))))
    for _ in range(places // 3):
        a, b = rng.sample(names, 2)
        roads.add(tuple(sorted((a, b))))
    facts = " ".join(f"(road {a} {b}) (road {b} {a})" for a, b in sorted(roads))
    problem = (
        f"(define (problem delivery-{places}-{seed}) (:domain delivery) (:objects {' '.join(names)} - place "
        "t1 t2 - truck k1 k2 - package) (:init (at t1 p0) (at t2 p0) (pkg-at k1 p0) (pkg-at k2 p0) "
        f"{facts}) (:goal (and (pkg-at k1 {names[places // 2]}) (pkg-at k2 {names[places // 2]}))))"
    )
    return parse_task(DELIVERY_DOMAIN, problem)


def risk_costs(task, seed: int, weight: float = 5.0) -> Callable[[Sequence[str]], dict[str, float]]:
    """Learned-cost-shaped costs: base + weight * -log(1 - p), p drawn per (seed, action)."""
    from domains.ground_text import parse_ground_action
    from domains.model import action_cost

    def p_fail(text: str) -> float:
        rng = random.Random(hashlib.sha256(f"{seed}:{text}".encode()).digest())
        return rng.uniform(0.3, 0.9) if rng.random() < 0.15 else rng.betavariate(1, 30)

    def costs(grounded: Sequence[str]) -> dict[str, float]:
        return {g: action_cost(task, parse_ground_action(g)) + weight * -math.log1p(-p_fail(g)) for g in grounded}

    return costs


def tasks(families: Sequence[str], seeds: Sequence[int]):
    """(family, name, task, seed) for every task of the run; `seed` None: the task's own costs."""
    from domains.bundled import bundled_task
    from domains.load import load_task

    for family in families:
        if family == "ipc-more-costs":
            more = SHARED_IPC.parent / "ipc-more"
            pairs = [line.split() for line in (more / "pairs.txt").read_text().splitlines() if line.strip()]
            for domain in IPC_MORE_COST_DOMAINS:
                mine = [(more / d, more / p) for d, p in pairs if d.startswith(domain + "/")]
                if mine:
                    d, p = min(mine, key=lambda pair: (pair[1].stat().st_size, pair[1].name))
                    yield family, f"{domain}/{p.stem}", load_task(d, p), None
            continue
        if family == "ipc-costs":
            for domain in IPC_COST_DOMAINS:
                folder = SHARED_IPC / domain
                problems = sorted(
                    (p for p in folder.glob("*.pddl") if p.name != "domain.pddl"),
                    key=lambda p: (p.stat().st_size, p.name),
                )[:2]
                for problem in problems:
                    yield family, f"{domain}/{problem.stem}", load_task(folder / "domain.pddl", problem), None
            continue
        for size in SIZES[family]:
            for seed in seeds:
                kind = family.removesuffix("-large")
                task = delivery_task(size, seed) if kind == "delivery" else bundled_task(kind, size, seed=seed)
                yield family, f"{family}-{size}-{seed}", task, seed


@dataclass
class Row:
    family: str
    name: str
    quality: str
    ms: float
    cost: float | None
    optimum: float | None
    optimal: bool
    blind_ms: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.cost is None or not self.optimum:
            return None
        return self.cost / self.optimum


@dataclass
class Run:
    rows: list[Row] = field(default_factory=list)
    unproved: list[str] = field(default_factory=list)


def cost_of(costs, task, plan) -> float:
    """The cost of `plan` under the cost model `costs` (None: the task's own costs)."""
    from portfolio.benchsuite.worlds.exact import plan_cost_under

    return plan_cost_under(task, plan, costs([str(step) for step in plan]) if costs else {})


def measure(
    families: Sequence[str],
    seeds: Sequence[int],
    qualities: Sequence[str],
    progress: bool = True,
    improve_share: float | None = None,
) -> Run:
    from portfolio.benchsuite.worlds.exact import ExactError, ExactSearch
    from portfolio.delegates.fast_downward.inprocess import INPROCESS_NAME
    from portfolio.engine.results import PlanRequest
    from portfolio.planner import Planner

    run = Run()
    planner = Planner()
    if improve_share is not None:  # what `quality="anytime"` spends on improvement (the default's choice)
        fast_downward = planner.fast_downward
        fast_downward.settings = replace(fast_downward.settings, improve_share=improve_share)
    exact = ExactSearch("tasks", budget_s=30.0)  # A* with LM-cut alone, never the measured arm's searches
    try:
        for family, name, task, seed in tasks(families, seeds):
            costs = None if seed is None else risk_costs(task, seed)
            planner.cascade.solve(PlanRequest(task=task, cost_function=costs, quality="first"))  # translated, warm
            optimum = None
            try:
                optimum = cost_of(costs, task, exact.solve(task, costs).actions())
            except ExactError:
                run.unproved.append(name)
            blind_ms = None
            if costs is not None:
                planner.cascade.solve(PlanRequest(task=task))  # the unit-cost race's processes started too
                started = time.perf_counter()
                planner.cascade.solve(PlanRequest(task=task))
                blind_ms = (time.perf_counter() - started) * 1000
            for quality in qualities:
                started = time.perf_counter()
                result = planner.cascade.solve(PlanRequest(task=task, cost_function=costs, quality=quality))
                ms = (time.perf_counter() - started) * 1000
                fd = next((a for a in result.attempts if a.delegate in ("fast-downward", INPROCESS_NAME)), None)
                cost = cost_of(costs, task, result.actions()) if result.solved else None
                run.rows.append(
                    Row(family, name, quality, ms, cost, optimum, bool(fd and fd.details.get("optimal")), blind_ms)
                )
            if progress:
                print(
                    f"  {name}: "
                    + ", ".join(
                        f"{r.quality} {r.ratio if r.ratio is None else round(r.ratio, 3)} {r.ms:.0f} ms"
                        for r in run.rows[-len(qualities) :]
                    ),
                    file=sys.stderr,
                )
    finally:
        exact.close()
        planner.close()
    return run


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def report(run: Run) -> str:
    lines = [
        "| family | quality | calls | cost / optimum median | p95 | max | proved optimal | ms median | p95 | "
        "max | > 1 s | > budget | with costs / cost-blind (median) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted(
        {(r.family, r.quality) for r in run.rows}, key=lambda k: (FAMILIES.index(k[0]), QUALITIES.index(k[1]))
    )
    for family, quality in keys:
        rows = [r for r in run.rows if r.family == family and r.quality == quality]
        ratios = [r.ratio for r in rows if r.ratio is not None]
        ms = [r.ms for r in rows]
        blind = [r.ms / r.blind_ms for r in rows if r.blind_ms]
        lines.append(
            f"| {family} | {quality} | {len(rows)} | "
            + (
                f"{statistics.median(ratios):.3f} | {_pct(ratios, 0.95):.3f} | {max(ratios):.3f}"
                if ratios
                else "- | - | -"
            )
            + f" | {sum(r.optimal for r in rows)}/{len(rows)} | {statistics.median(ms):.1f} | {_pct(ms, 0.95):.1f} | "
            f"{max(ms):.1f} | {sum(m > BUDGET_S * 1000 for m in ms)} | {sum(m > CASCADE_S * 1000 for m in ms)} | "
            + (f"{statistics.median(blind):.2f}x |" if blind else "- |")
        )
    if run.unproved:
        lines.append(f"\nunproved optimum (left out of the ratios): {', '.join(run.unproved)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--qualities", default=",".join(QUALITIES))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--first-seed", type=int, default=100, help="100 and up: held out (0-2 were tuning, with ipc-costs)"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write cost-search.md there")
    parser.add_argument(
        "--improve-share",
        type=float,
        default=None,
        help="the anytime search's share of the time left (default: IMPROVE_SHARE)",
    )
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    qualities = [q for q in args.qualities.split(",") if q]
    bad = [f for f in families if f not in FAMILIES] + [q for q in qualities if q not in QUALITIES]
    if bad:
        print(f"unknown families or qualities: {', '.join(bad)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    run = measure(
        families, range(args.first_seed, args.first_seed + args.seeds), qualities, improve_share=args.improve_share
    )
    text = report(run) + f"\n\n{len(run.rows)} calls in {time.perf_counter() - started:.0f} s"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cost-search.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
