"""The report's log axes stay readable: on the cactus plot, the latency plot and the
scatter plots, no two tick labels overlap, whatever span of times the runs cover - one decade and a half was
enough for matplotlib's minor labels (2x10^-2, 3x10^-2, ...) to run into each other."""

from __future__ import annotations

import pytest

from portfolio.benchsuite import report


def records(low: float, high: float, n: int = 40) -> list[dict]:
    """Two planners solving n tasks in times spread from low to high seconds."""
    out = []
    for planner, factor in (("a", 1.0), ("b", 1.3)):
        for i in range(n):
            time = low * (high / low) ** (i / (n - 1))
            out.append(
                {
                    "planner": planner,
                    "task": f"t{i}",
                    "domain": "d",
                    "status": "solved",
                    "valid": True,
                    "time_s": min(time * factor, high),
                    "size": 5 + i,
                    "budget_s": 1.0,
                }
            )
    return out


def overlapping_labels(figure) -> list[tuple[str, str]]:
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    found = []
    for axes in figure.axes:
        for axis, limits in ((axes.xaxis, axes.get_xlim()), (axes.yaxis, axes.get_ylim())):
            low, high = sorted(limits)
            shown = [
                (t.get_text(), t.get_window_extent(renderer))
                for t in axis.get_ticklabels(which="both")
                if t.get_visible()
                and t.get_text()
                and low <= (t.get_position()[0] if axis is axes.xaxis else t.get_position()[1]) <= high
            ]
            found += [(a, b) for i, (a, box) in enumerate(shown) for b, other in shown[i + 1 :] if box.overlaps(other)]
    return found


@pytest.mark.parametrize("low, high", [(0.02, 0.6), (0.3, 0.45), (0.001, 20.0)])
def test_no_tick_labels_overlap_on_the_log_axes(tmp_path, monkeypatch, low, high):
    pytest.importorskip("matplotlib")
    checked: dict[str, list] = {}
    save = report._save

    def check_then_save(figure, path):
        checked[path.name] = overlapping_labels(figure)
        return save(figure, path)

    monkeypatch.setattr(report, "_save", check_then_save)
    report.plot_all(records(low, high), ["a", "b"], "a", tmp_path)
    assert set(checked) == {"cactus.png", "latency-size.png", "scatter-b-vs-a.png"}
    assert checked == {name: [] for name in checked}
