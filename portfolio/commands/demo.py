"""`make demo`: a research agent with unreliable tools replans within a run and learns across runs.

    python -m portfolio.commands.demo [--runs 6] [--traces PATH] [--seed 3] [--outage 0.8] [--verbose]

Each run asks the agent (`domains.bundled.tools_sim`) for a write-up. The cheap news wire times out most of the
time: the loop retries it (transient failure), then plans around it (the archive) in the same run. Every step
goes to a trace store (a temporary file unless --traces is given); between runs the failure model is retrained
and the planner reloads it, so after a few runs the learned cost of the wire makes the archive the first
choice. The summary shows, per run, the tool tried first, the steps and the replans with their triggers.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from domains.bundled.tools_sim import Request, WriteUp, make_tools
from portfolio.agent import Agent


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m portfolio.commands.demo",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=6, help="runs of the agent (default 6)")
    parser.add_argument("--traces", help="trace store path (default: a temporary file, deleted afterwards)")
    parser.add_argument("--seed", type=int, default=3, help="seed of the simulated tools (default 3)")
    parser.add_argument("--outage", type=float, default=0.8, help="probability that the wire times out (0.8)")
    parser.add_argument(
        "--cost-weight",
        type=float,
        default=5.0,
        help="lambda: cost units per nat of failure risk (default 5, the planner's)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every plan, step and replan event")
    return parser


def classical_demo() -> None:
    """The planner on its own: a bundled logistics problem through the cascade, every attempt shown."""
    from domains.bundled import bundled_task
    from portfolio.planner import Planner

    task = bundled_task("logistics", 6, seed=1)
    with Planner() as planner:
        result = planner.plan(task)
        again = planner.plan(task)
    print(
        f"planning bundled logistics (6 packages): {result.status.value}, {len(result.plan)} steps, cost "
        f"{result.cost:g}, by {result.delegate} in {result.elapsed_ms:.0f} ms (warm repeat: {again.elapsed_ms:.0f} ms)"
    )
    for step in result.plan[:6]:
        print(f"  {step}")
    if len(result.plan) > 6:
        print(f"  ... {len(result.plan) - 6} more steps, all checked by the validator")
    for attempt in result.attempts:
        print(f"  attempt {attempt.delegate}: {attempt.status.value} in {attempt.elapsed_ms:.1f} ms {attempt.reason}")
    print("\nan agent with unreliable tools: replanning within a run, learned costs across runs")


def demo(runs: int, traces: str, seed: int, outage: float, cost_weight: float) -> int:
    classical_demo()
    tools = make_tools(seed=seed, outage=outage)
    failures = 0
    with Agent(tools, traces=traces, cost_weight=cost_weight, backoff_s=0.01, max_retries=2) as agent:
        for number in range(1, runs + 1):
            started = time.monotonic()
            result = agent.run(Request("Write a short piece about Ada Lovelace."), goal=WriteUp)
            wall_ms = (time.monotonic() - started) * 1000
            first = next((s.action for s in result.steps if "fetch" in s.action), "-")
            print(f"\nrun {number}: {result.status} in {wall_ms:.0f} ms, first news tool {first}")
            for step in result.steps:
                extra = f" [{step.category}, {step.decision}] {step.error}" if step.outcome == "failure" else ""
                print(f"  step {step.step}: {step.action:16} {step.outcome:8} {step.ms:6.2f} ms{extra}")
            for replan in result.replans:
                print(f"  replan ({replan.trigger}, {replan.ms:.1f} ms) -> {' '.join(replan.plan)}")
            if result.succeeded:
                print(f"  output: {result.output.text}")
            else:
                failures += 1
                print(f"  conceded: {result.reason}")
            info = agent.learn()
            wire = info.actions.get("fetch-wire", {})
            costs = agent.costs(Request("Write a short piece about Ada Lovelace."), goal=WriteUp)
            learned = ", ".join(_priced(name, c) for name, c in sorted(costs.items()) if "fetch" in name)
            print(
                f"  retrained model v{info.version} on {info.n_steps} steps (wire: {wire.get('failures', 0)} of "
                f"{wire.get('steps', 0)} calls failed); learned costs: {learned}"
            )
        print(f"\ncounters: {agent.counters.snapshot()}")
        print(
            "p_fail: the model's estimate from the steps since the tool's failure rate last changed, with its 90% "
            "interval; cost: what plans pay for it (docs/learning.md explains each number)"
        )
    return 1 if failures == runs else 0


def _priced(name: str, cost) -> str:
    """`(fetch-wire) 11.80 (p_fail 0.77, 90% 0.57-0.93, 3 of 3 failed)`: a learned cost and what it rests on."""
    text = f"{name} {cost.cost:.2f} (p_fail {cost.p_fail:.2f}"
    if cost.interval is not None:
        text += f", 90% {cost.interval[0]:.2f}-{cost.interval[1]:.2f}"
    if cost.evidence is not None:
        text += f", {cost.evidence.failures_since} of {cost.evidence.since_change} failed"
    return text + ")"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    if args.runs < 1 or not 0.0 <= args.outage <= 1.0:
        print("--runs must be >= 1 and --outage within [0, 1]", file=sys.stderr)
        return 2
    if args.traces:
        return demo(args.runs, args.traces, args.seed, args.outage, args.cost_weight)
    with tempfile.TemporaryDirectory(prefix="portfolio-demo-") as folder:
        return demo(args.runs, str(Path(folder) / "traces.db"), args.seed, args.outage, args.cost_weight)


if __name__ == "__main__":
    sys.exit(main())
