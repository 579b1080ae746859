"""The learning evaluation's report: per-window success rates, the targets' verdicts, the Markdown table, the plot.

`learning_eval.py` runs the episodes and hands back an `Evaluation`; this module only reads it: `windows`
(success and expected success per window of episodes), `verdicts` (the issue's targets on the final window),
`report` (Markdown), `plot` (PNG, matplotlib imported on first use so the harness and its tests do not pay for it)
and `write_results` (learning.md, learning.png, learning.json in `RESULTS_DIR`). `learning_eval` re-exports all of
these, so `from benchmarks.experiments.learning_eval import report` keeps working.

The names the report prints and the harness runs by (the arms, the domain and the task latency is measured on,
the targets, the results folder) and the `Evaluation` it reads are `learning_data.py`'s, at the bottom of the
dependency chain, so the harness imports its report without an import cycle.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.experiments.learning_data import (
    ARMS,
    DOMAIN,
    LATENCY_TASK,
    RESULTS_DIR,
    TARGET_FAILURES_VS_BLIND,
    TARGET_LATENCY_OVERHEAD,
    TARGET_SUCCESS_VS_ORACLE,
    Evaluation,
)


@dataclass
class WindowRow:
    first: int  # 1-based episode numbers, inclusive
    last: int
    success: dict[str, float]
    expected: dict[str, float]


def windows(evaluation: Evaluation) -> list[WindowRow]:
    """Success rate and mean expected success of each arm per window of `evaluation.window` episodes (the last
    window may be shorter)."""
    rows = []
    for first in range(0, evaluation.episodes, evaluation.window):
        last = min(first + evaluation.window, evaluation.episodes)
        success, expected = {}, {}
        for arm in ARMS:
            chunk = [o for o in evaluation.of(arm) if first <= o.episode < last]
            success[arm] = sum(o.success for o in chunk) / len(chunk)
            expected[arm] = sum(o.expected_success for o in chunk) / len(chunk)
        rows.append(WindowRow(first + 1, last, success, expected))
    return rows


@dataclass
class Verdict:
    name: str
    measured: float
    target: str
    met: bool
    noise_free: float | None = None  # the same comparison on expected success


def verdicts(evaluation: Evaluation) -> list[Verdict]:
    """The issue's targets, on the final window (realised outcomes; expected success alongside)."""
    final = windows(evaluation)[-1]
    s, e = final.success, final.expected
    ratio = s["learned"] / s["oracle"] if s["oracle"] else float("nan")
    blind_fail, learned_fail = 1 - s["cost-blind"], 1 - s["learned"]
    fail_ratio = learned_fail / blind_fail if blind_fail else float("inf")
    e_fail_ratio = (1 - e["learned"]) / (1 - e["cost-blind"]) if e["cost-blind"] < 1 else float("inf")
    out = [
        Verdict(f"learned success / oracle success (episodes {final.first}-{final.last})", round(ratio, 3),
                f">= {TARGET_SUCCESS_VS_ORACLE}", ratio >= TARGET_SUCCESS_VS_ORACLE,
                round(e["learned"] / e["oracle"], 3) if e["oracle"] else None),
        Verdict(f"learned failures / cost-blind failures (episodes {final.first}-{final.last})",
                round(fail_ratio, 3), f"<= {TARGET_FAILURES_VS_BLIND}", fail_ratio <= TARGET_FAILURES_VS_BLIND,
                round(e_fail_ratio, 3)),
    ]  # fmt: skip
    if evaluation.latency is not None:
        overhead = evaluation.latency.overhead
        out.append(
            Verdict(
                "warm plan latency overhead of learned costs",
                overhead,
                f"<= {TARGET_LATENCY_OVERHEAD:.2f}",
                overhead <= TARGET_LATENCY_OVERHEAD,
            )
        )
    return out


def report(evaluation: Evaluation) -> str:
    """The Markdown report: window table, totals, target verdicts, latency."""
    lines = [
        f"# Learning evaluation: {evaluation.episodes} episodes, retrain every {evaluation.retrain_every}, "
        f"lambda {evaluation.lam}, seed {evaluation.seed}",
        "",
        f"Failure model parameters: {evaluation.model_params or 'library defaults'}.",
        "",
        "Success rate per window (realised; in parentheses the mean true success probability of the chosen plans).",
        "No replanning: an episode fails at its first failed step.",
        "",
        "| episodes | " + " | ".join(ARMS) + " |",
        "|---|" + "---|" * len(ARMS),
    ]
    for row in windows(evaluation):
        cells = [f"{row.success[a]:.2f} ({row.expected[a]:.2f})" for a in ARMS]
        lines.append(f"| {row.first}-{row.last} | " + " | ".join(cells) + " |")
    lines += ["", "| whole run | " + " | ".join(ARMS) + " |", "|---|" + "---|" * len(ARMS)]
    rows = {
        "success rate": lambda os: sum(o.success for o in os) / len(os),
        "expected success": lambda os: sum(o.expected_success for o in os) / len(os),
        "mean base cost": lambda os: sum(o.base_cost for o in os) / len(os),
        "median plan ms": lambda os: statistics.median(o.plan_ms for o in os),
    }
    for name, fn in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{fn(evaluation.of(a)):.3f}" for a in ARMS) + " |")
    lines += ["", "## Targets", ""]
    for v in verdicts(evaluation):
        extra = f" (on expected success: {v.noise_free})" if v.noise_free is not None else ""
        lines.append(f"- {'MET' if v.met else 'MISSED'}: {v.name} = {v.measured} (target {v.target}){extra}")
    final = windows(evaluation)[-1].success
    if final["cost-blind"] < 1:
        lines.append(
            f"- For reference, the oracle's failures / cost-blind failures in the same window: "
            f"{(1 - final['oracle']) / (1 - final['cost-blind']):.3f} (what the world allows)."
        )
    lat = evaluation.latency
    if lat is not None:
        lines += [
            "",
            f"Warm latency ({DOMAIN} size {LATENCY_TASK[0]} seed {LATENCY_TASK[1]}, median of "
            f"{lat.rounds}): recording plans in a trace store without a model {lat.recorded_ms} ms, with "
            f"learned costs {lat.learned_ms} ms ({lat.overhead:+.1%}); no trace store {lat.plain_ms} ms "
            f"(recording adds {lat.store_overhead:+.1%}); cost lookup {lat.cost_lookup_warm_ms} ms warm, "
            f"{lat.cost_lookup_cold_ms} ms right after a model reload.",
        ]
    lines += [
        "",
        f"Model versions trained: {evaluation.model_versions}; retrain+reload median "
        f"{statistics.median(evaluation.retrain_seconds) if evaluation.retrain_seconds else 0:.3f} s; "
        f"wall time {evaluation.seconds} s.",
    ]
    return "\n".join(lines) + "\n"


def plot(evaluation: Evaluation, path: Path) -> None:
    """Success rate per window (solid: realised, dashed: expected) for each arm, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = windows(evaluation)
    x = [row.last for row in rows]
    colours = {"cost-blind": "tab:red", "learned": "tab:blue", "oracle": "tab:green"}
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=120)
    for arm in ARMS:
        ax.plot(x, [r.success[arm] for r in rows], marker="o", color=colours[arm], label=f"{arm}: realised")
        ax.plot(
            x, [r.expected[arm] for r in rows], linestyle="--", color=colours[arm], alpha=0.7, label=f"{arm}: expected"
        )
    ax.set_xlabel(f"episode (end of each window of {evaluation.window})")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1.02)
    ax.set_xticks(x)
    ax.grid(alpha=0.3)
    params = ", ".join(f"{k}={v:g}" if v is not None else f"{k}=None" for k, v in evaluation.model_params.items())
    ax.set_title(
        f"Plan success with learned costs (retrain every {evaluation.retrain_every} episodes, "
        f"lambda={evaluation.lam:g}; model: {params or 'defaults'})",
        fontsize=10,
    )
    ax.legend(fontsize=8, ncol=3, loc="lower center")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def write_results(evaluation: Evaluation, out_dir: Path = RESULTS_DIR) -> dict[str, Path]:
    """learning.md (the report), learning.png (the plot) and learning.json (every episode of every arm)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"md": out_dir / "learning.md", "png": out_dir / "learning.png", "json": out_dir / "learning.json"}
    paths["md"].write_text(report(evaluation), encoding="utf-8")
    plot(evaluation, paths["png"])
    data = asdict(evaluation)
    data["windows"] = [asdict(row) for row in windows(evaluation)]
    data["verdicts"] = [asdict(v) for v in verdicts(evaluation)]
    paths["json"].write_text(json.dumps(data, indent=1), encoding="utf-8")
    return paths
