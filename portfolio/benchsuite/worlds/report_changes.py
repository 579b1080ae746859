"""The report's sections on changing truth and on plan-success calibration (`adapt.py`'s numbers), per type.

    summary = changes_summary(runs, policies)              # report.summarise adds it as summary["changes"]
    lines = changes_tables(summaries, policies)            # report.report appends them
    reliability_plot(runs_by_kind, policies, path)         # learning-worlds-reliability.png

Leave and return are pooled over every event of the type's worlds (a flapping world has several): the median
and max, how many events meet the target (leave: at most `TARGET_LEAVE` failures of the broken steps; return:
within `TARGET_RETURN` episodes, over the recoveries the arm had left the steps before) and how many never left
or never came back before the next event or the run's end; the oracle's beside them (it knows the truth: 0
failures, 0 episodes, unless the change does not change its plan). Calibration of the predicted plan success
from episode `adapt.FROM_EPISODE` on, pooled over the type's worlds: ECE (target `TARGET_ECE`), Brier score,
mean |predicted - true plan success|; cost-blind's beside it, taken to predict 1.0 (it plans with no model: its
ECE and Brier are its failure rate).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from portfolio.benchsuite.worlds.adapt import FROM_EPISODE, plan_pairs, scores, true_gap

TARGET_LEAVE = 3  # failures of the broken steps after a break before the plans leave them
TARGET_RETURN = 20  # episodes after a recovery until a plan uses the steps again
TARGET_ECE = 0.05


def _stats(values: Sequence[int | None], target: int) -> dict:
    known = [v for v in values if v is not None]
    return {
        "events": len(values),
        "median": statistics.median(known) if known else None,
        "max": max(known) if known else None,
        "within_target": sum(v <= target for v in known),
        "never": len(values) - len(known),
    }


def changes_summary(runs: Sequence, policies: Sequence[str]) -> dict:
    """Per arm: leave and return over the type's events (changing worlds only) and plan-success calibration."""
    out: dict = {"leave": {}, "return": {}, "calibration": {}}
    arms = ["cost-blind", *(f"learned-{p}" for p in policies), "oracle"]
    if any(r.events for r in runs):
        for arm in arms:
            rows = [row for r in runs for row in r.shifts.get(arm, [])]
            breaks = [row for row in rows if row["event"] == "break"]
            # an arm that never left counts every failure it had (a lower bound), so "never" is reported beside it
            left = [row["episodes"] for row in breaks if row["episodes"] is not None]
            out["leave"][arm] = _stats([row["failures"] for row in breaks], TARGET_LEAVE) | {
                "never": len(breaks) - len(left),
                "episodes_median": statistics.median(left) if left else None,
            }
            recoveries = [row for row in rows if row["event"] == "recovery"]
            out["return"][arm] = _stats([row["episodes"] for row in recoveries if row["away"]], TARGET_RETURN) | {
                "not_away": sum(not row["away"] for row in recoveries)
            }
    for arm in arms[:-1]:
        s = scores(plan_pairs(runs, arm))
        if s:
            out["calibration"][arm] = s | {"true_gap": true_gap(runs, arm)}
    return out


def _n(x) -> str:
    return "n/a" if x is None else (f"{x:.1f}" if isinstance(x, float) and not x.is_integer() else f"{x:g}")


def changes_tables(summaries: dict[str, dict], policies: Sequence[str]) -> list[str]:
    """The report's lines: leave/return per changing type and arm, then calibration per type and arm."""
    lines: list[str] = []
    changing = {kind: s["changes"] for kind, s in summaries.items() if s.get("changes", {}).get("leave")}
    if changing:
        lines += [
            "",
            f"Changing truth, over every event of the type's worlds. Leave: failures of the broken steps after a "
            f"break before a plan holds none of them (target <= {TARGET_LEAVE}; an arm that never left before the "
            f"next event counts all its failures and is counted in 'never'), and the episodes that took. Return: "
            f"episodes after a recovery until a plan uses them again (target <= {TARGET_RETURN}; 'never': not "
            "before the next event or the run's end), over the recoveries where the arm had left them ('still on "
            "them': recoveries where its plan just before still used them, so there was nothing to return from):",
            "",
            "| type | arm | breaks | leave failures: median | max | <= target | never left | leave episodes: "
            "median | recoveries | still on them | return episodes: median | max | <= target | never returned |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for kind, c in changing.items():
            for arm, leave in c["leave"].items():
                back = c["return"][arm]
                lines.append(
                    f"| {kind} | {arm} | {leave['events']} | {_n(leave['median'])} | {_n(leave['max'])} | "
                    f"{leave['within_target']} | {leave['never']} | {_n(leave['episodes_median'])} | "
                    f"{back['events'] + back['not_away']} | {back['not_away']} | {_n(back['median'])} | "
                    f"{_n(back['max'])} | {back['within_target']} | {back['never']} |"
                )
    calibrated = {kind: s["changes"]["calibration"] for kind, s in summaries.items() if s.get("changes")}
    if any(calibrated.values()):
        lines += [
            "",
            f"Calibration of the predicted plan success probability (learned arms: the product of 1 - p_fail "
            f"over the plan, the posterior means it was planned with; cost-blind plans with no model and is "
            f"taken to predict 1.0, so its ECE and Brier are its failure rate), against whether the episode "
            f"succeeded, episodes {FROM_EPISODE} on, pooled over the type's worlds: ECE over 10 equal-width bins "
            f"(target <= {TARGET_ECE}), Brier score, and mean |predicted - true plan success| (noise-free):",
            "",
            "| type | arm | episodes | ECE | Brier | mean \\|predicted - true\\| |",
            "|---|---|---|---|---|---|",
        ]
        for kind, by_arm in calibrated.items():
            for arm, c in by_arm.items():
                gap = "n/a" if c["true_gap"] is None else f"{c['true_gap']:.3f}"
                lines.append(f"| {kind} | {arm} | {c['n']} | {c['ece']:.3f} | {c['brier']:.3f} | {gap} |")
    return lines


def reliability_plot(summaries: dict[str, dict], policies: Sequence[str], path: Path) -> None:
    """One panel per type: observed success rate against predicted plan success, per bin (marker area ~ count),
    for each learned arm, and cost-blind's single point at 1.0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k, s in summaries.items() if s.get("changes", {}).get("calibration")]
    if not kinds:
        return
    fig, axes = plt.subplots(1, len(kinds), figsize=(max(3.2 * len(kinds), 4), 3.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for arm, c in summaries[kind]["changes"]["calibration"].items():
            bins = c["bins"]
            x, y, counts = [b[0] for b in bins], [b[1] for b in bins], [b[2] for b in bins]
            (line,) = ax.plot(
                x, y, label=f"{arm} (ECE {c['ece']:.3f})", linestyle="-" if arm != "cost-blind" else "none"
            )
            # a bin of a few episodes says little: its marker is as small as its share of the episodes
            ax.scatter(x, y, s=[8 + 300 * n / c["n"] for n in counts], color=line.get_color(), zorder=3)
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_title(kind)
        ax.set_xlabel("predicted plan success")
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel(f"observed success (episodes {FROM_EPISODE}+)")
    fig.text(0.5, 0.01, "marker area: the bin's share of the episodes", fontsize=8, ha="center")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)
