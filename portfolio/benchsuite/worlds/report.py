"""The learning-worlds report: per world type, over worlds, median and range (never the best world).

    summary = {kind: summarise(runs, policies) for kind, runs in runs_by_kind.items()}
    paths = write_results(runs_by_kind, policies, out)       # learning-worlds.md, .json, .png

Per type and policy: in the last window of 50 episodes, learned expected success as a share of the oracle's and
learned failures as a share of cost-blind's (where cost-blind fails >= 10%), each as the spread over worlds, the
type's pooled ratio (sums over its worlds: the type's success and failures, what the targets are read on) and how
many worlds meet the target on their own (the tail: single worlds where early luck misled exploration for the whole
run); the final model's calibration against the true probabilities (mean absolute error; a reliability plot);
consistency (largest |p_fail - observed rate| over groundings with >= 30 recorded steps). `type` worlds add, per
world, the p_fail a new vehicle of the bad type starts with next to its siblings' recorded steps and observed
failure rate at that moment. Expected success (the true probability that the chosen plan succeeds) is noise-free, so
windows of 50 episodes separate plan quality from luck; realised success by window is reported too.

Plan quality, per type and policy, over every learned call of every world (pooled): the returned plan's cost
under the very costs the call planned with, as a ratio to the optimum under the same costs (median and p95;
targets 1.05 and 1.2), the calls' latency (median, p95, max), how many exceeded their budget and the median
latency as a share of the cost-blind calls' (target: at most 2); then seconds per world, warm latency apart from
the episodes where measured (`latency.py`), and which delegate and search answered each arm's calls.

Changing truth and plan-success calibration (`report_changes.py`): per changing type, how many failures each arm
takes to leave a step that broke and how many episodes to return to it after it recovered; per type, the ECE and
Brier score of the learned calls' predicted plan success beside cost-blind's.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from portfolio.benchsuite.worlds.adapt import reliability_bins
from portfolio.benchsuite.worlds.latency import latency_summary, latency_table
from portfolio.benchsuite.worlds.report_changes import changes_summary, changes_tables, reliability_plot
from portfolio.benchsuite.worlds.runner import SIBLING_STEPS, WorldRun
from portfolio.benchsuite.worlds.scores import paired_costs, quality

WINDOW = 50
TARGET_SUCCESS = 0.95  # learned expected success / oracle's
TARGET_FAILURES = 0.5  # learned failures / cost-blind's, where cost-blind fails >= 10% and the oracle halves them
TARGET_QUALITY = (1.05, 1.2)  # learned plan cost / the optimum under the same costs: median, p95


def window_rates(runs: Sequence[WorldRun], arm: str, window: int = WINDOW) -> list[float]:
    episodes = runs[0].episodes
    return [
        statistics.mean(statistics.mean(r.success[arm][s : s + window]) for r in runs)
        for s in range(0, episodes, window)
    ]


def summarise(runs: Sequence[WorldRun], policies: Sequence[str]) -> dict:
    """Per policy, over worlds: last-window success vs oracle, failures vs cost-blind, calibration."""
    out: dict = {"worlds": len(runs), "windows": {}}
    arms = ["cost-blind", *(f"learned-{p}" for p in policies), "oracle"]
    for arm in arms:
        out["windows"][arm] = [round(x, 3) for x in window_rates(runs, arm)]
    last = slice(-WINDOW, None)
    out["seconds"] = _spread([r.seconds for r in runs])
    out["searches"] = {arm: _merged(r.searches.get(arm, {}) for r in runs) for arm in arms}
    out["changes"] = changes_summary(runs, policies)
    for policy in policies:
        arm = f"learned-{policy}"
        ratios, failure_ratios, maes, gaps, oracle_ratios, avoidable = [], [], [], [], [], []
        sums = {"learned": 0.0, "oracle": 0.0, "learned_fail": 0.0, "blind_fail": 0.0}
        cost_ratios, cost_sums = [], [0.0, 0.0]
        for r in runs:
            paid = paired_costs(r, arm, last)
            if paid is not None:
                cost_ratios.append(paid[0] / paid[1] if paid[1] else 1.0)
                cost_sums[0], cost_sums[1] = cost_sums[0] + paid[0], cost_sums[1] + paid[1]
            oracle = statistics.mean(r.expected["oracle"][last])
            learned = statistics.mean(r.expected[arm][last])
            ratios.append(learned / oracle if oracle else 1.0)
            sums["learned"] += learned
            sums["oracle"] += oracle
            blind_fail = 1 - statistics.mean(r.expected["cost-blind"][last])
            if blind_fail >= 0.10:
                failure_ratios.append((1 - learned) / blind_fail)
                # what the world allows: where even the oracle cannot halve cost-blind's failures (the only
                # route is a bad one), no learner can
                oracle_ratios.append((1 - oracle) / blind_fail)
                if oracle_ratios[-1] <= 0.5:
                    avoidable.append(failure_ratios[-1])
                    sums["learned_fail"] += 1 - learned
                    sums["blind_fail"] += blind_fail
            if r.calibration.get(policy):
                maes.append(r.calibration[policy]["mae"])
                if r.calibration[policy]["consistency_max_gap"] is not None:
                    gaps.append(r.calibration[policy]["consistency_max_gap"])
        out[policy] = {
            "success_vs_oracle": _spread(ratios), "failures_vs_blind": _spread(failure_ratios),
            "blind_fails_10pct_worlds": len(failure_ratios), "calibration_mae": _spread(maes),
            "oracle_failures_vs_blind": _spread(oracle_ratios), "failures_vs_blind_avoidable": _spread(avoidable),
            "avoidable_worlds": len(avoidable),
            "pooled_success_vs_oracle": round(sums["learned"] / sums["oracle"], 3) if sums["oracle"] else None,
            "pooled_failures_vs_blind_avoidable": (round(sums["learned_fail"] / sums["blind_fail"], 3)
                                                   if sums["blind_fail"] else None),
            "worlds_success_target": sum(x >= TARGET_SUCCESS for x in ratios),
            "worlds_failures_target": sum(x <= TARGET_FAILURES for x in avoidable),
            "consistency_max_gap": max(gaps) if gaps else None,
            "true_cost_vs_oracle": _spread(cost_ratios),
            "pooled_true_cost_vs_oracle": round(cost_sums[0] / cost_sums[1], 3) if cost_sums[1] else None,
        }  # fmt: skip
        out[policy]["quality"] = quality([q for r in runs for q in r.quality.get(policy, [])])
        out[policy]["latency"] = latency_summary(runs, policy)
        blind_ms = [ms for r in runs for ms in r.latency_ms.get("cost-blind", [])]
        learned_ms = [q["ms"] for r in runs for q in r.quality.get(policy, [])]  # the calls with learned costs
        out[policy]["latency_vs_blind"] = (
            round(statistics.median(learned_ms) / statistics.median(blind_ms), 2)
            if blind_ms and learned_ms and statistics.median(blind_ms) > 0
            else None
        )
        for key, field in (("new_object", "new_object"), ("new_object_100", "new_object_100")):
            rows = [
                getattr(r, field)[policy] for r in runs if getattr(r, field).get(policy, {}).get("p_new") is not None
            ]
            if rows:
                out[policy][key] = {
                    "worlds": len(rows), "p_new": _spread([n["p_new"] for n in rows]),
                    "sibling_steps": _spread([n["sibling_steps"] for n in rows]),
                    "gap_siblings": _spread([n["gap_siblings"] for n in rows if n["gap_siblings"] is not None]),
                    "gap_true": _spread([n["gap_true"] for n in rows]),
                    "within_0.15_of_siblings": sum(n["gap_siblings"] is not None and n["gap_siblings"] <= 0.15
                                                   for n in rows),
                }  # fmt: skip
    return out


def _merged(counts) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for key, n in c.items():
            total[key] = total.get(key, 0) + n
    return dict(sorted(total.items(), key=lambda kv: -kv[1]))


def _spread(values: Sequence[float]) -> dict | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _fmt(s: dict | None) -> str:
    return "n/a" if not s else f"{s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}]"


def report(
    summary: dict[str, dict], policies: Sequence[str], runs_by_kind: dict[str, list[WorldRun]] | None = None
) -> str:
    lines = [
        "| type | worlds | policy | success / oracle (last 50, expected) | failures / cost-blind "
        "| oracle's failures / cost-blind | failures / cost-blind where the oracle halves them "
        "| calibration MAE | max consistency gap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, s in summary.items():
        for policy in policies:
            p = s[policy]
            gap = "n/a" if p["consistency_max_gap"] is None else f"{p['consistency_max_gap']:.3f}"
            lines.append(
                f"| {kind} | {s['worlds']} | {policy} | {_fmt(p['success_vs_oracle'])} | "
                f"{_fmt(p['failures_vs_blind'])} ({p['blind_fails_10pct_worlds']} worlds) | "
                f"{_fmt(p.get('oracle_failures_vs_blind'))} | "
                f"{_fmt(p.get('failures_vs_blind_avoidable'))} ({p.get('avoidable_worlds', 0)} worlds) | "
                f"{_fmt(p['calibration_mae'])} | {gap} |"
            )
    lines += [
        "",
        f"Per type, pooled over its worlds (targets: success / oracle >= {TARGET_SUCCESS}, failures / "
        f"cost-blind <= {TARGET_FAILURES} where the oracle halves them), and worlds meeting each on their own; "
        "beside them, the price: the learned plans' true cost (base + lambda * -log(1 - true p_fail), what the "
        "oracle minimises) over the oracle's, pooled and median [min, max] over worlds:",
        "",
        "| type | policy | success / oracle, pooled | worlds >= target | failures / cost-blind, pooled "
        "| worlds <= target | true cost / oracle's, pooled | per world |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, s in summary.items():
        for policy in policies:
            p = s[policy]
            pooled_failures = p.get("pooled_failures_vs_blind_avoidable")
            lines.append(
                f"| {kind} | {policy} | {_num(p.get('pooled_success_vs_oracle'))} | "
                f"{p.get('worlds_success_target', 0)} of {s['worlds']} | {_num(pooled_failures)} | "
                f"{p.get('worlds_failures_target', 0)} of {p.get('avoidable_worlds', 0)} | "
                f"{_num(p.get('pooled_true_cost_vs_oracle'))} | {_fmt(p.get('true_cost_vs_oracle'))} |"
            )
    lines += [
        "",
        f"Plan quality of the learned calls, pooled per type (the plan's cost under the costs it was "
        f"planned with / the optimum under the same costs, exact search; targets: median <= "
        f"{TARGET_QUALITY[0]}, p95 <= {TARGET_QUALITY[1]}), latency and seconds per world:",
        "",
        "| type | policy | calls | cost / optimum: median | p95 | max | share <= 1.05 | latency ms: median "
        "| p95 | max | over budget | median latency / cost-blind's | seconds per world |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, s in summary.items():
        for policy in policies:
            q = s[policy].get("quality")
            if q:
                lines.append(
                    f"| {kind} | {policy} | {q['calls']} | {q['ratio_median']:.3f} | {q['ratio_p95']:.3f} | "
                    f"{q['ratio_max']:.3f} | {q['within_1.05']:.2f} | {q['ms_median']:.1f} | "
                    f"{q['ms_p95']:.1f} | {q['ms_max']:.1f} | {q['over_budget']} | "
                    f"{_num(s[policy].get('latency_vs_blind'))} | {_fmt(s.get('seconds'))} |"
                )
    lines += changes_tables(summary, policies)
    lines += latency_table(summary, policies)
    lines += ["", "Who answered (delegate/search: calls, over every world of the type):", ""]
    for kind, s in summary.items():
        for arm, counts in s.get("searches", {}).items():
            if counts:
                lines.append(f"- {kind}, {arm}: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    lines += ["", f"Realised success by window of {WINDOW} episodes (mean over worlds):", ""]
    for kind, s in summary.items():
        rates = "; ".join(f"{arm} {' '.join(f'{x:.2f}' for x in w)}" for arm, w in s["windows"].items())
        lines.append(f"- {kind}: {rates}")
    for kind, s in summary.items():
        for policy in policies:
            for key, when in (
                ("new_object", "when it joins"),
                ("new_object_100", f"after {SIBLING_STEPS}+ sibling steps"),
            ):
                n = s[policy].get(key)
                if n:
                    lines.append(
                        f"- {kind}, {policy}: a new van-a {when} ({n['worlds']} worlds): p_fail "
                        f"{_fmt(n['p_new'])}, |new - siblings' observed rate| {_fmt(n['gap_siblings'])} "
                        f"(within 0.15 in {n['within_0.15_of_siblings']}), "
                        f"|new - true| {_fmt(n['gap_true'])}"
                    )
    for kind, runs in (runs_by_kind or {}).items():
        if any(r.new_object for r in runs):
            lines += ["", *new_object_table(kind, runs, policies)]
    return "\n".join(lines)


def new_object_table(kind: str, runs: Sequence[WorldRun], policies: Sequence[str]) -> list[str]:
    """Per world and policy: a new bad-type vehicle's starting p_fail, its siblings' recorded drives (plain and
    recency-weighted) and observed failure rate at that moment, and the two gaps; when the new vehicle joins
    (episode 100), and at the first retrain where the siblings have 100+ recorded drives (an unseen van-a)."""

    def num(x, digits=2):
        return "n/a" if x is None else f"{x:.{digits}f}"

    lines = [
        f"New vehicle of the bad type in `{kind}` worlds (target: within 0.15 of its type's rate after "
        f"{SIBLING_STEPS} steps of its siblings):",
        "",
        "| world | policy | episode | new p_fail | sibling steps (weighted) | siblings' observed rate | "
        "\\|new - siblings\\| | \\|new - true\\| |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        for policy in policies:
            for n in (r.new_object.get(policy), r.new_object_100.get(policy)):
                if n:
                    lines.append(
                        f"| {r.world} | {policy} | {n['episode']} | {num(n['p_new'])} | "
                        f"{n['sibling_steps']} ({n['sibling_weight']:.0f}) | {num(n['sibling_rate'])} | "
                        f"{num(n.get('gap_siblings'))} | {num(n.get('gap_true'))} (true {n['true']:.2f}) |"
                    )
    return lines


def plot(runs_by_kind: dict[str, list[WorldRun]], policies: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(runs_by_kind)
    fig, axes = plt.subplots(2, len(kinds), figsize=(max(3.2 * len(kinds), 5), 6.4), squeeze=False)
    for col, kind in enumerate(kinds):
        runs = runs_by_kind[kind]
        ax = axes[0][col]
        for arm in ["cost-blind", *(f"learned-{p}" for p in policies), "oracle"]:
            rates = [
                statistics.mean(statistics.mean(r.expected[arm][max(0, i - 24) : i + 1]) for r in runs)
                for i in range(runs[0].episodes)
            ]
            ax.plot(rates, label=arm)
        ax.set_title(kind)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("episode")
        ax = axes[1][col]
        for policy in policies:
            pairs = [pt for r in runs for pt in r.calibration.get(policy, {}).get("pairs", [])]
            if pairs:
                bins = reliability_bins(pairs)
                ax.plot([b[0] for b in bins], [b[1] for b in bins], marker="o", label=policy)
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":")
        ax.set_xlabel("predicted p_fail")
    axes[0][0].set_ylabel("expected success (25-episode mean)")
    axes[1][0].set_ylabel("true p_fail")
    axes[0][-1].legend(fontsize=7)
    if axes[1][-1].get_legend_handles_labels()[0]:
        axes[1][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def bundled_table(rows: dict) -> list[str]:
    """The report's section for `bundled_quality`'s rows."""
    lines = [
        "Plan quality with learned costs on the bundled tasks (the default cascade's plan / the optimum under "
        "the same costs; unproved: calls whose optimum A* with LM-cut could not prove in its budget; unsolved: calls "
        "with learned costs that returned no plan):",
        "",
        "| task | calls | cost / optimum: median | p95 | max | latency ms: median | p95 | max | over budget "
        "| unproved | unsolved | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, q in rows.items():
        if q.get("calls"):
            lines.append(
                f"| {name} | {q['calls']} | {q['ratio_median']:.3f} | {q['ratio_p95']:.3f} | "
                f"{q['ratio_max']:.3f} | {q['ms_median']:.1f} | {q['ms_p95']:.1f} | {q['ms_max']:.1f} | "
                f"{q['over_budget']} | {q['unproved']} | {q['unsolved']} | {q['seconds']:.0f} |"
            )
        else:
            lines.append(
                f"| {name} | 0 | n/a | n/a | n/a | n/a | n/a | n/a | 0 | {q['unproved']} | "
                f"{q['unsolved']} | {q['seconds']:.0f} |"
            )
    return lines


def write_results(
    runs_by_kind: dict[str, list[WorldRun]],
    policies: Sequence[str],
    out: Path,
    bundled: dict | None = None,
    stem: str = "learning-worlds",
) -> dict[str, Path]:
    """STEM.md (the report), STEM.json (summary and every run, without the calibration points), STEM.png
    (curves and reliability of p_fail) and, where learned calls predicted plan success, STEM-reliability.png (its
    reliability diagram, `report_changes.reliability_plot`) in `out`; returns their paths. `bundled`:
    `bundled.bundled_quality`'s rows, added as a section of the report and a key of the JSON."""
    summary = {kind: summarise(runs, policies) for kind, runs in runs_by_kind.items()}
    out.mkdir(parents=True, exist_ok=True)
    paths = {"report": out / f"{stem}.md", "json": out / f"{stem}.json", "plot": out / f"{stem}.png"}
    if any(s["changes"]["calibration"] for s in summary.values()):
        paths["reliability"] = out / f"{stem}-reliability.png"
    text = report(summary, policies, runs_by_kind)
    if bundled:
        text += "\n\n" + "\n".join(bundled_table(bundled))
    paths["report"].write_text(text + "\n")
    paths["json"].write_text(
        json.dumps(
            {
                "summary": summary,
                "bundled": bundled,
                "runs": [
                    asdict(r)
                    | {
                        "calibration": {
                            p: {k: v for k, v in c.items() if k != "pairs"} for p, c in r.calibration.items()
                        }
                    }
                    for runs in runs_by_kind.values()
                    for r in runs
                ],
            },
            indent=1,
        )
    )
    plot(runs_by_kind, policies, paths["plot"])
    if "reliability" in paths:
        reliability_plot(summary, policies, paths["reliability"])
    return paths
