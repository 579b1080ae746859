"""Time to first plan with Fast Downward's default translation vs translator variants that skip work.

    PYTHONPATH=. python -m benchmarks.bench_translate_options [--per-domain 8] [--budget 5]
                                                              [--roots ipc,ipc-more] [--domains a,b]
    PYTHONPATH=. python -m benchmarks.bench_translate_options --collector [--domains a,b] [--per-domain 8]

Per domain, the problems `benchmarks.bench_selection` picks; per problem and variant (`VARIANTS`, in rotating
order): the translator in this process (warm, `portfolio.delegates.fast_downward.translate`), the SAS text parsed and
rendered as the
delegate does, then the delegate's fixed search order (`FastDownward.search_sas`: lama-first + eager-ff-cg on 2
cores; the cost-aware pair on tasks with costs), and the plan checked by the validator. Time = translate + parse +
search: what a variant changes in the planner's `elapsed_ms`. Prints per domain the mean time per variant, its
translate and search parts, how many solved and how many plans the validator rejected. With `--collector`:
translation CPU time (default flags) with Python's garbage collector paused, as
`portfolio.delegates.fast_downward.translate` runs it,
and with it on (the pause replaced by a no-op), alternating, on the held-back half of the picked problems.

Measured 2026-11-30 (before the translator's collector pause; 8 problems per domain, 5 s, load average 1-4 on
2 cores; ipc complete, then agricola and assembly of ipc-more): no plan rejected by the validator. Mean time
to first plan, defaults vs `--keep-unreachable-facts --skip-variable-reordering`: satellite 0.65 vs 0.41 s
(translation 0.53 vs 0.32), elevators 0.87 vs 0.71, depot 2.49 vs 1.72 (search 2.09 vs 1.40, one more solved),
transport 2.45 vs 2.15, rovers 0.28 vs 0.20, parking 11.8 vs 11.6 (translation 7.1 vs 6.9 s wall; CPU 3.1 vs
2.6 s with the first flag alone), agricola 20.0 vs 17.0 (translation 15.0 vs 12.0 s; 2 solved vs none); the
small domains (blocks, gripper, logistics00, miconic, visitall, assembly) within noise; driverlog 0.82 vs 0.83,
barman 3.39 vs 3.21 (7 solved vs 5). `--keep-unimportant-variables` on top doubled the variables on rovers and
assembly. Translation is faster by 0.6-1.0x, search changes both ways: worth learning per domain, not a default.

`--collector` (2026-11-30, load 2-3): translation CPU paused / on 0.61x over 10 ipc domains (8 per domain:
parking 0.58, transport 0.58, satellite 0.63, elevators 0.68, depot 0.71, barman 0.89, rovers 0.95) and 0.66x
over ipc-more (`--per-domain 4`, without labyrinth, slitherlink and agricola, whose translations take minutes:
tidybot 0.59, spider 0.60, folding 0.61, caldera 0.64; tasks translated in milliseconds ~1.0).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import portfolio.delegates.fast_downward.translate
from benchmarks.bench_selection import SHARED, load_all, pick
from domains.validate import validate_plan
from portfolio.delegates.fast_downward.delegate import FastDownward
from portfolio.delegates.fast_downward.sas import parse_sas
from portfolio.delegates.fast_downward.translate import translate
from portfolio.engine.results import Status

VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (),
    "keep-unreachable": ("--keep-unreachable-facts",),
    "keep+skip-reorder": ("--keep-unreachable-facts", "--skip-variable-reordering"),
    "keep+no-reorder-pass": ("--keep-unreachable-facts", "--skip-variable-reordering", "--keep-unimportant-variables"),
}


def one(delegate: FastDownward, task, options: tuple[str, ...], budget: float) -> dict:
    """Translate with `options`, search with the fixed order, validate; the times and the outcome."""
    start = time.monotonic()
    result = translate(task.domain_pddl, task.problem_pddl, options)
    sas = None if result.unsolvable else parse_sas(result.sas)
    translated = time.monotonic()
    if sas is None:
        return {
            "translate": translated - start,
            "search": 0.0,
            "solved": False,
            "invalid": False,
            "operators": 0,
            "variables": 0,
        }
    outcome = delegate.search_sas(sas.render(), translated + budget, delegate.plan_sas(task.has_action_costs()))
    searched = time.monotonic()
    solved = outcome.status is Status.SOLVED and outcome.plan is not None
    invalid = solved and not validate_plan(task, outcome.plan).ok
    return {
        "translate": translated - start,
        "search": searched - translated,
        "solved": solved and not invalid,
        "invalid": invalid,
        "operators": len(sas.operators),
        "variables": len(sas.values),
    }


def collector(domains: list, per_domain: int) -> None:
    """Translation CPU seconds per domain with the collector paused vs on (module docstring)."""
    paused = portfolio.delegates.fast_downward.translate.collector_paused
    totals = {"paused": 0.0, "on": 0.0}
    for domain in domains:
        spent = {"paused": 0.0, "on": 0.0}
        problems = pick(domain, per_domain)[1::2]
        text = (domain / "domain.pddl").read_text()
        for index, problem in enumerate(problems):
            for mode in ("paused", "on") if index % 2 == 0 else ("on", "paused"):
                portfolio.delegates.fast_downward.translate.collector_paused = (
                    paused if mode == "paused" else contextlib.nullcontext
                )
                try:
                    start = time.process_time()
                    translate(text, problem.read_text())
                    spent[mode] += time.process_time() - start
                except Exception as error:
                    print(f"  {domain.name}/{problem.name} {mode}: {type(error).__name__}", flush=True)
                finally:
                    portfolio.delegates.fast_downward.translate.collector_paused = paused
        totals = {mode: totals[mode] + spent[mode] for mode in totals}
        print(
            f"{domain.parent.name}/{domain.name}: paused {spent['paused']:.3f} s, on {spent['on']:.3f} s, ratio "
            f"{spent['paused'] / max(spent['on'], 1e-9):.2f}",
            flush=True,
        )
    print(
        f"overall: paused {totals['paused']:.2f} s, on {totals['on']:.2f} s CPU, ratio "
        f"{totals['paused'] / max(totals['on'], 1e-9):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-domain", type=int, default=8)
    parser.add_argument("--budget", type=float, default=5.0)
    parser.add_argument("--roots", default="ipc,ipc-more")
    parser.add_argument("--domains", default="")
    parser.add_argument("--collector", action="store_true", help="measure the collector pause instead")
    args = parser.parse_args()
    only = {d for d in args.domains.split(",") if d}
    if args.collector:
        collector(
            [
                domain
                for root in args.roots.split(",")
                for domain in sorted(p for p in (SHARED / root).iterdir() if (p / "domain.pddl").exists())
                if not only or domain.name in only
            ],
            args.per_domain,
        )
        return
    print(f"load average {os.getloadavg()[0]:.2f}, budget {args.budget} s", flush=True)
    totals: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with FastDownward(workers=2) as delegate:
        delegate.warm_up()
        for root in args.roots.split(","):
            for domain in sorted(p for p in (SHARED / root).iterdir() if (p / "domain.pddl").exists()):
                if only and domain.name not in only:
                    continue
                tasks = load_all(pick(domain, args.per_domain), domain / "domain.pddl")
                rows: dict[str, list[dict]] = {name: [] for name in VARIANTS}
                if tasks:  # untimed: the domain's first translation pays imports and parser warm-up
                    translate(tasks[0].domain_pddl, tasks[0].problem_pddl)
                for index, task in enumerate(tasks):
                    names = list(VARIANTS)
                    names = names[index % len(names) :] + names[: index % len(names)]
                    for name in names:
                        try:
                            rows[name].append(one(delegate, task, VARIANTS[name], args.budget))
                        except Exception as error:
                            print(f"  {domain.name} {name}: {type(error).__name__}: {error}", flush=True)
                            rows[name].append(
                                {
                                    "translate": args.budget,
                                    "search": 0.0,
                                    "solved": False,
                                    "invalid": False,
                                    "operators": 0,
                                    "variables": 0,
                                }
                            )
                parts = []
                for name, runs in rows.items():
                    if not runs:
                        continue
                    total = [r["translate"] + (r["search"] if r["solved"] else args.budget) for r in runs]
                    totals[name].extend(total)
                    parts.append(
                        f"{name} {statistics.mean(total):.3f} s (tr {statistics.mean(r['translate'] for r in runs):.3f}"
                        f" se {statistics.mean(r['search'] for r in runs):.3f} solved "
                        f"{sum(r['solved'] for r in runs)} invalid {sum(r['invalid'] for r in runs)} ops "
                        f"{sum(r['operators'] for r in runs)} vars {sum(r['variables'] for r in runs)})"
                    )
                print(f"{root}/{domain.name}: " + "; ".join(parts) + f"; load {os.getloadavg()[0]:.2f}", flush=True)
    base = statistics.mean(totals["default"])
    print(
        "overall: "
        + "; ".join(
            f"{name} {statistics.mean(t):.3f} s ({statistics.mean(t) / base:.2f}x)" for name, t in totals.items() if t
        )
    )


if __name__ == "__main__":
    main()
