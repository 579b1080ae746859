"""How an arm follows a changing truth, and how well its predicted plan success is calibrated: pure functions over
what `runner.run_world` records (`WorldRun.events`, `.watched`, `.predicted`, `.success`), kept apart from the
runner and the report so that each number can be checked on a hand-made run.

    shifts(run.events, run.watched["learned-cautious"])    # per break: failures before leaving; per recovery: return
    scores(plan_pairs([run], "learned-cautious"))          # ECE, Brier and the reliability bins of plan success

Leave (after a break at episode b): the failures of watched steps (`World.watched`) the arm executed from b on,
up to the first episode from b whose plan holds no watched step (`failures`, that episode - b in `episodes`);
`episodes` None (and every failure counted) when every plan until the next event or the run's end held one.
Return (after a recovery at r): episodes from r to the first plan that holds a watched step again; None if none
does before the next event or the run's end; `away` says whether the arm's plan just before r held none (an arm
that never left has nothing to return from: its 0 is no return, and the report counts it apart).

Calibration of the predicted plan success probability (the product of 1 - p_fail over the plan's steps, the
posterior means the call planned with: `PlanResult.success_probability`) against whether the episode succeeded:
the expected calibration error over 10 equal-width bins (|mean predicted - observed rate| weighted by the bin's
count) and the Brier score (mean squared difference). `true_gap` is the mean |predicted - the true probability
that the plan succeeds| (noise-free, where a few hundred outcomes make the ECE noisy).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

FROM_EPISODE = 50  # calibration is scored from this episode on (the target: after 50 episodes)
BINS = 10


def shifts(events: Sequence[tuple[int, str]], watched: Sequence[tuple[int, int]]) -> list[dict]:
    """Per event (episode, "break" | "recovery"), what the arm did (module docstring). `watched`: per episode,
    (watched steps in the arm's plan, watched steps that failed when executed)."""
    out = []
    for k, (at, what) in enumerate(events):
        end = min(events[k + 1][0] if k + 1 < len(events) else len(watched), len(watched))
        row: dict = {"episode": at, "event": what, "episodes": None}
        if what == "break":
            failures = 0
            for index in range(at, end):
                uses, failed = watched[index]
                if uses == 0:
                    row["episodes"] = index - at
                    break
                failures += failed
            row["failures"] = failures
        else:
            row["away"] = at > 0 and watched[at - 1][0] == 0
            row["episodes"] = next((i - at for i in range(at, end) if watched[i][0] > 0), None)
        out.append(row)
    return out


def reliability_bins(pairs: Sequence[tuple[float, bool | float]], bins: int = BINS) -> list[tuple[float, float, int]]:
    """(mean predicted, mean outcome, count) of the (predicted probability, outcome) pairs in each of `bins`
    equal-width bins that holds any, in order."""
    table: list[list[tuple[float, float]]] = [[] for _ in range(bins)]
    for p, outcome in pairs:
        table[min(int(p * bins), bins - 1)].append((p, float(outcome)))
    return [
        (statistics.mean(p for p, _ in inside), statistics.mean(o for _, o in inside), len(inside))
        for inside in table
        if inside
    ]


def scores(pairs: Sequence[tuple[float, bool | float]], bins: int = BINS) -> dict | None:
    """ECE (equal-width bins, weighted by count), Brier score and the reliability bins (mean predicted, observed
    rate, count) of (predicted probability, outcome) pairs; None without pairs."""
    if not pairs:
        return None
    reliability = reliability_bins(pairs, bins)
    ece = sum(n * abs(p - o) for p, o, n in reliability) / len(pairs)
    brier = statistics.mean((p - float(o)) ** 2 for p, o in pairs)
    return {"n": len(pairs), "ece": round(ece, 4), "brier": round(brier, 4), "bins": reliability}


def plan_pairs(runs: Sequence, arm: str, first: int = FROM_EPISODE) -> list[tuple[float, bool]]:
    """(predicted plan success, succeeded) per episode from `first` on, pooled over `runs`. Learned arms: the
    call's prediction (episodes without one, no model yet or no plan, are left out); cost-blind plans with no
    model, and is taken to predict success 1.0 (every step's p_fail 0: what planning without traces assumes)."""
    out = []
    for r in runs:
        predicted = r.predicted.get(arm) if arm != "cost-blind" else [1.0] * r.episodes
        if not predicted:
            continue
        out += [(p, s) for p, s in zip(predicted[first:], r.success[arm][first:]) if p is not None]
    return out


def true_gap(runs: Sequence, arm: str, first: int = FROM_EPISODE) -> float | None:
    """Mean |predicted plan success - its true probability| from `first` on (`plan_pairs`'s episodes)."""
    gaps = []
    for r in runs:
        predicted = r.predicted.get(arm) if arm != "cost-blind" else [1.0] * r.episodes
        gaps += [abs(p - t) for p, t in zip((predicted or [])[first:], r.expected[arm][first:]) if p is not None]
    return round(statistics.mean(gaps), 4) if gaps else None
