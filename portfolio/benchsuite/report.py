"""`portfolio bench report DIR`: tables and plots from a results folder, as Markdown, HTML and PNG.

Counting. A run counts as solved when its planner said solved and the validator did not reject the plan
(`valid` is True, or None when our parser could not read the task but the planner could). With `--repeat N`, a
task is solved by a planner when more than half of its runs were, and its time is the median of the solved
runs' `time_s`. Latency columns are over solved tasks; the ratio to the baseline is the median, over the tasks
both solved, of planner time / baseline time (per-task ratios, so a planner that solves more, harder tasks is
not penalised for them).

Plots (matplotlib, Agg): a cactus plot (tasks solved within t seconds, log t), latency against task size
(objects in the task), and one scatter per planner against the baseline (unsolved tasks drawn on the border).
"""

from __future__ import annotations

import html
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portfolio.benchsuite.store import ResultsError, read_runs, runs_path
from portfolio.benchsuite.suites import safe_name

EXPERIMENT_FILE = "experiment.json"


def is_solved(record: dict[str, Any]) -> bool:
    return record.get("status") == "solved" and record.get("valid") is not False


@dataclass
class TaskResult:
    """One planner on one task, over its repeats."""

    planner: str
    task: str
    domain: str
    runs: int = 0
    solved_runs: int = 0
    times: list[float] = field(default_factory=list)
    size: int | None = None

    @property
    def solved(self) -> bool:
        return self.solved_runs * 2 > self.runs

    @property
    def time(self) -> float | None:
        return statistics.median(self.times) if self.solved and self.times else None


def task_results(records: list[dict[str, Any]]) -> dict[tuple[str, str], TaskResult]:
    """(planner, task) -> TaskResult."""
    found: dict[tuple[str, str], TaskResult] = {}
    for record in records:
        key = (record["planner"], record["task"])
        result = found.setdefault(key, TaskResult(record["planner"], record["task"], record["domain"]))
        result.runs += 1
        result.size = record.get("size", result.size)
        if is_solved(record):
            result.solved_runs += 1
            if record.get("time_s") is not None:
                result.times.append(float(record["time_s"]))
    return found


def planners_of(records: list[dict[str, Any]], preferred: list[str] | None = None) -> list[str]:
    seen = list(dict.fromkeys(r["planner"] for r in records))
    order = [p for p in preferred or [] if p in seen]
    return order + [p for p in seen if p not in order]


def coverage(records: list[dict[str, Any]]) -> dict[str, dict[str, tuple[int, int]]]:
    """domain -> planner -> (solved, tasks). The table `bench run` prints and that local and Dask runs share."""
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for result in task_results(records).values():
        cell = table[result.domain][result.planner]
        cell[0] += result.solved
        cell[1] += 1
    return {d: {p: (c[0], c[1]) for p, c in sorted(row.items())} for d, row in sorted(table.items())}


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class LatencyRow:
    planner: str
    solved: int
    tasks: int
    median_s: float | None
    p95_s: float | None
    ratio: float | None  # median per-task time ratio to the baseline, on tasks both solved
    common: int  # tasks both solved


def latency(records: list[dict[str, Any]], baseline: str, planners: list[str]) -> list[LatencyRow]:
    results = task_results(records)
    rows = []
    for planner in planners:
        mine = {t: r for (p, t), r in results.items() if p == planner}
        times = [r.time for r in mine.values() if r.time is not None]
        ratios = []
        for task, result in mine.items():
            other = results.get((baseline, task))
            if result.time is not None and other is not None and other.time:
                ratios.append(result.time / other.time)
        rows.append(
            LatencyRow(
                planner,
                sum(r.solved for r in mine.values()),
                len(mine),
                statistics.median(times) if times else None,
                percentile(times, 95) if times else None,
                statistics.median(ratios) if ratios else None,
                len(ratios),
            )
        )
    return rows


# -- plots ----------------------------------------------------------------------------------------------------------


def plot_all(records: list[dict[str, Any]], planners: list[str], baseline: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    results = task_results(records)
    budget = max((float(r.get("budget_s") or 1.0) for r in records), default=1.0)
    written = []

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for planner in planners:
        times = sorted(r.time for (p, _), r in results.items() if p == planner and r.time is not None)
        if times:
            axes.step([times[0]] + times, [0] + list(range(1, len(times) + 1)), where="post", label=planner)
    axes.set_xscale("log")
    _readable_log_axis(axes.xaxis, axes.get_xlim())
    axes.set_xlabel("time per task (s, log)")
    axes.set_ylabel("tasks solved")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title("Cactus plot: tasks solved within t")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    written.append(_save(figure, out / "cactus.png"))

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for planner in planners:
        points = sorted(
            (r.size, r.time)
            for (p, _), r in results.items()
            if p == planner and r.time is not None and r.size is not None
        )
        if points:
            axes.scatter([x for x, _ in points], [y for _, y in points], s=12, alpha=0.7, label=planner)
    axes.set_yscale("log")
    _readable_log_axis(axes.yaxis, axes.get_ylim())
    axes.set_xlabel("task size (objects)")
    axes.set_ylabel("time (s, log)")
    axes.set_title("Latency against task size (solved tasks)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    written.append(_save(figure, out / "latency-size.png"))

    border = budget * 2
    for planner in planners:
        if planner == baseline:
            continue
        pairs = []
        for (p, task), result in results.items():
            other = results.get((baseline, task))
            if p == planner and other is not None:
                pairs.append((other.time or border, result.time or border))
        if not pairs:
            continue
        figure, axes = plt.subplots(figsize=(4.8, 4.8))
        axes.scatter([x for x, _ in pairs], [y for _, y in pairs], s=14, alpha=0.7)
        low = min(min(x for x, _ in pairs), min(y for _, y in pairs)) / 1.5
        axes.plot([low, border], [low, border], color="grey", linewidth=0.8)
        axes.set_xscale("log")
        axes.set_yscale("log")
        _readable_log_axis(axes.xaxis, axes.get_xlim())
        _readable_log_axis(axes.yaxis, axes.get_ylim())
        axes.set_xlabel(f"{baseline} time (s); unsolved at {border:g}")
        axes.set_ylabel(f"{planner} time (s); unsolved at {border:g}")
        axes.set_title(f"{planner} vs {baseline}")
        axes.grid(alpha=0.3)
        written.append(_save(figure, out / f"scatter-{safe_name(planner)}-vs-{safe_name(baseline)}.png"))
    return written


def _readable_log_axis(axis, limits: tuple[float, float]) -> None:
    """Log-scale ticks that never overlap: matplotlib labels minor ticks (2x10^-2, 3x10^-2, ...) once fewer than
    two decades are shown, and over one to two decades at this width they run into each other. Here the labels
    sit at 1, 2, 5 (1, 2, 3, 5 within one decade; decades alone over more than 2.5), as plain numbers, and the
    minor ticks stay unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    low, high = sorted(limits)
    decades = math.log10(high / low) if low > 0 else 3.0
    subs = (1.0,) if decades > 2.5 else (1.0, 2.0, 5.0) if decades > 1.0 else (1.0, 2.0, 3.0, 5.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def _save(figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


# -- documents ------------------------------------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def tables(
    records: list[dict[str, Any]], planners: list[str], baseline: str
) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table of the report, as text cells."""
    cover = coverage(records)
    coverage_rows = [
        [domain] + [f"{row[p][0]}/{row[p][1]}" if p in row else "-" for p in planners] for domain, row in cover.items()
    ]
    totals = [sum(row[p][0] for row in cover.values() if p in row) for p in planners]
    counts = [sum(row[p][1] for row in cover.values() if p in row) for p in planners]
    coverage_rows.append(["**total**"] + [f"{s}/{n}" for s, n in zip(totals, counts)])
    latency_rows = [
        [
            r.planner,
            f"{r.solved}/{r.tasks}",
            _seconds(r.median_s),
            _seconds(r.p95_s),
            "-" if r.ratio is None else f"{r.ratio:.2f}",
            str(r.common),
        ]
        for r in latency(records, baseline, planners)
    ]
    found = [
        ("Coverage per domain (solved/tasks)", ["domain", *planners], coverage_rows),
        (
            f"Latency of solved tasks (time_s); ratio: median per-task time / {baseline}'s",
            ["planner", "solved", "median s", "p95 s", f"ratio to {baseline}", "tasks both solved"],
            latency_rows,
        ),
    ]
    solvers = solved_by(records)
    if solvers:
        delegates = sorted({d for row in solvers.values() for d in row})
        found.append(
            (
                "Solved runs by delegate (which tier of a cascade solved them)",
                ["planner", *delegates],
                [[p] + [str(solvers[p].get(d, 0)) for d in delegates] for p in planners if p in solvers],
            )
        )
    return found


def solved_by(records: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """planner -> delegate -> solved runs, for planners that say which delegate solved (Planner-based ones)."""
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record in records:
        if is_solved(record) and record.get("delegate"):
            table[record["planner"]][record["delegate"]] += 1
    return {p: dict(row) for p, row in table.items()}


def markdown(report_tables, images: list[Path], summary: str) -> str:
    lines = ["# portfolio bench report", "", summary, ""]
    for title, header, rows in report_tables:
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    lines += ["## Plots", ""] + [f"![{image.stem}]({image.name})" for image in images]
    return "\n".join(lines) + "\n"


_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}td:first-child,th:first-child"
    "{text-align:left}th{background:#f3f3f3}img{max-width:48%;margin:.5em}"
)


def html_page(report_tables, images: list[Path], summary: str) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>portfolio bench report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>portfolio bench report</h1>",
        f"<p>{html.escape(summary)}</p>",
    ]
    for title, header, rows in report_tables:
        parts.append(
            f"<h2>{html.escape(title)}</h2><table><thead><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in header)
            + "</tr></thead><tbody>"
        )
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{html.escape(c.strip('*'))}</td>" for c in row) + "</tr>")
        parts.append("</tbody></table>")
    parts.append("<h2>Plots</h2>")
    parts += [f'<img src="{html.escape(i.name)}" alt="{html.escape(i.stem)}">' for i in images]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def experiment(out_dir: Path) -> dict[str, Any]:
    path = Path(out_dir) / EXPERIMENT_FILE
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        raise ResultsError("not valid JSON", file=str(path)) from None


def write_report(out_dir: Path, baseline: str | None = None) -> dict[str, Path]:
    """Write report.md, report.html and the PNGs into `out_dir`; their paths by kind."""
    out_dir = Path(out_dir)
    records = read_runs(runs_path(out_dir))
    if not records:
        raise ResultsError(f"no runs in {runs_path(out_dir)}; run `portfolio bench run ... --out {out_dir}` first")
    planners = planners_of(records, experiment(out_dir).get("planners"))
    baseline = baseline or planners[0]
    if baseline not in planners:
        raise ResultsError(f"baseline {baseline!r} has no runs here; planners: {', '.join(planners)}")
    report_tables = tables(records, planners, baseline)
    images = plot_all(records, planners, baseline, out_dir)
    tasks = len({r["task"] for r in records})
    summary = (
        f"{len(records)} runs of {len(planners)} planners on {tasks} tasks "
        f"(budget {', '.join(sorted({str(r.get('budget_s')) for r in records}))} s); baseline {baseline}."
    )
    paths = {"markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    paths["markdown"].write_text(markdown(report_tables, images, summary), encoding="utf-8")
    paths["html"].write_text(html_page(report_tables, images, summary), encoding="utf-8")
    return paths | {image.stem: image for image in images}
