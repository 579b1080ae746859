"""Where the learned arm loses to the oracle, world by world: `portfolio bench learning`'s worlds with every arm's
plan captured (the runner is not changed: its planners are wrapped from outside).

    python -m benchmarks.experiments.learning_gap --kinds vehicle-roads --first-seed 0 --seeds 20 --jobs 2

Per world, over the last 50 of 200 episodes: learned / oracle expected success (the report's criterion: the true
probability that the chosen plan succeeds, so no outcome noise enters it) and realised success (the outcome
draws, common to the arms); how many episodes the learned arm planned a plan of lower true success than the
oracle's, and the loss split by why:
- `risky`: the learned plan holds a step whose true p_fail >= 0.3 that the oracle's does not (it trusted a bad
  grounding: `untried` if it had no recorded step of it, else `tried`, with the p_fail it gave it);
- `cautious`: no such step: the learned plan is longer or uses other fair steps because it avoided a good one
  that the oracle used (with the p_fail it gave that one).
Then the same loss over episodes 0-149 (exploration) for comparison. Out: a table on stdout, --json for rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

RISKY = 0.3
LAST = 50


def _capture_world(kind: str, seed: int, episodes: int, model_params: dict | None = None) -> dict:
    from portfolio.benchsuite.worlds import runner
    from portfolio.benchsuite.worlds.exact import ExactSearch
    from portfolio.benchsuite.worlds.family import make_world
    from portfolio.planner import Planner

    world = make_world(kind, seed)
    rows: dict[int, dict] = {}
    current: dict = {}
    original_plan, original_solve = Planner.plan, ExactSearch.solve
    tried: Counter = Counter()

    def plan(self, task, **kw):
        result = original_plan(self, task, **kw)
        if self.store is None or not result.solved:
            return result
        spec = current["spec"]
        row = rows.setdefault(spec.index, {})
        row["learned"] = [str(s) for s in result.actions()]
        oracle = row.get("oracle", [])
        steps = {*row["learned"], *oracle}
        model = self.model
        if model is not None:
            from domains.ground_text import parse_ground_action

            parsed = [parse_ground_action(s) for s in sorted(steps)]
            p = model.predict_proba(parsed, spec.context, object_types=task.objects())
            row["believed"] = {s: round(float(x), 3) for s, x in zip(sorted(steps), p)}
        row["tried"] = {s: tried[s] for s in steps}
        for s, _failed in runner.execute(world, task, result.actions(), spec):
            tried[str(s)] += 1
        return result

    def solve(self, task, costs):
        result = original_solve(self, task, costs)
        if callable(costs) and not isinstance(costs, dict) and result.solved:
            rows.setdefault(current["spec"].index, {})["oracle"] = [str(s) for s in result.actions()]
        return result

    original_episode = type(world).episode

    def episode(self, index):
        spec = original_episode(self, index)
        if self is world:
            current["spec"] = spec
        return spec

    Planner.plan, ExactSearch.solve = plan, solve  # type: ignore[method-assign]
    type(world).episode = episode  # type: ignore[method-assign]
    try:
        run = runner.run_world(world, episodes, policies=("cautious",), model_params=model_params)
    finally:
        Planner.plan, ExactSearch.solve = original_plan, original_solve  # type: ignore[method-assign]
        type(world).episode = original_episode  # type: ignore[method-assign]
    from domains.ground_text import parse_ground_action

    spec_of = {i: world.episode(i) for i in rows}
    episodes_out = []
    for i, row in sorted(rows.items()):
        spec = spec_of[i]

        def p_true(s: str, spec=spec) -> float:
            return world.p_fail(parse_ground_action(s), spec)

        learned, oracle = row.get("learned", []), row.get("oracle", [])
        out = {
            "episode": i,
            "learned_expected": run.expected["learned-cautious"][i],
            "oracle_expected": run.expected["oracle"][i],
            "learned_len": len(learned),
            "oracle_len": len(oracle),
        }
        risky = [s for s in learned if p_true(s) >= RISKY and s not in oracle]
        avoided = [s for s in oracle if s not in learned]
        out["risky"] = [
            {"step": s, "true": p_true(s), "believed": row.get("believed", {}).get(s), "tried": row["tried"].get(s, 0)}
            for s in risky
        ]
        out["avoided"] = [
            {"step": s, "true": p_true(s), "believed": row.get("believed", {}).get(s), "tried": row["tried"].get(s, 0)}
            for s in avoided
        ]
        episodes_out.append(out)
    return {
        "world": world.name,
        "kind": kind,
        "success": run.success,
        "expected": run.expected,
        "episodes": episodes_out,
    }


def summarise_world(w: dict, episodes: int) -> dict:
    last = slice(episodes - LAST, episodes)
    lo, oo = statistics.mean(w["expected"]["learned-cautious"][last]), statistics.mean(w["expected"]["oracle"][last])
    lr, orr = statistics.mean(w["success"]["learned-cautious"][last]), statistics.mean(w["success"]["oracle"][last])
    out = {"world": w["world"], "expected_ratio": lo / oo if oo else 1.0, "realised_ratio": lr / orr if orr else 1.0}
    out["learned_expected"], out["oracle_expected"] = round(lo, 3), round(oo, 3)
    out["learned_realised"], out["oracle_realised"] = round(lr, 3), round(orr, 3)
    for name, window in (("late", range(episodes - LAST, episodes)), ("early", range(0, episodes - LAST))):
        rows = [e for e in w["episodes"] if e["episode"] in window]
        worse = [e for e in rows if e["learned_expected"] < e["oracle_expected"] - 1e-9]
        loss = {"risky_untried": 0.0, "risky_tried": 0.0, "cautious": 0.0}
        for e in worse:
            delta = e["oracle_expected"] - e["learned_expected"]
            if e["risky"]:
                key = "risky_untried" if all(r["tried"] == 0 for r in e["risky"]) else "risky_tried"
            else:
                key = "cautious"
            loss[key] += delta / max(len(window), 1)
        out[name] = {"worse_episodes": len(worse), **{k: round(v, 4) for k, v in loss.items()}}
        if name == "late":
            out["late_risky"] = [r for e in worse for r in e["risky"]]
            out["late_avoided"] = [r for e in worse if not e["risky"] for r in e["avoided"]]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", default="vehicle-roads")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", default=None, help="write every world's rows here")
    args = parser.parse_args(argv)
    worlds = [(k, s) for k in args.kinds.split(",") for s in range(args.first_seed, args.first_seed + args.seeds)]
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        captured = list(pool.map(_capture_world, *zip(*worlds), [args.episodes] * len(worlds)))
    summaries = [summarise_world(w, args.episodes) for w in captured]
    print(
        "| world | expected L / O | ratio | realised L / O | late worse eps | late loss: risky untried, tried, "
        "cautious | early loss: risky untried, tried, cautious |"
    )
    print("|---|---|---|---|---|---|---|")
    for s in summaries:
        la, ea = s["late"], s["early"]
        print(
            f"| {s['world']} | {s['learned_expected']:.3f} / {s['oracle_expected']:.3f} | {s['expected_ratio']:.3f} | "
            f"{s['learned_realised']:.2f} / {s['oracle_realised']:.2f} | {la['worse_episodes']} | "
            f"{la['risky_untried']:.4f}, {la['risky_tried']:.4f}, {la['cautious']:.4f} | "
            f"{ea['risky_untried']:.4f}, {ea['risky_tried']:.4f}, {ea['cautious']:.4f} |"
        )
    ratios = [s["expected_ratio"] for s in summaries]
    print(
        f"\nworlds >= 0.95: {sum(r >= 0.95 for r in ratios)} of {len(ratios)}; "
        f"median {statistics.median(ratios):.3f}, min {min(ratios):.3f}"
    )
    for key in ("risky_untried", "risky_tried", "cautious"):
        print(
            f"late loss {key}: {sum(s['late'][key] for s in summaries) / len(summaries):.4f} per episode "
            f"(early {sum(s['early'][key] for s in summaries) / len(summaries):.4f})"
        )
    believed = [r["believed"] for s in summaries for r in s["late_avoided"] if r["believed"] is not None]
    true = [r["true"] for s in summaries for r in s["late_avoided"]]
    if believed:
        print(
            f"late avoided good steps: {len(believed)}, believed p_fail median {statistics.median(believed):.3f} "
            f"(true median {statistics.median(true):.3f}); tried median "
            f"{statistics.median(r['tried'] for s in summaries for r in s['late_avoided'])}"
        )
    risky = [r for s in summaries for r in s["late_risky"]]
    if risky:
        print(
            f"late risky steps taken: {len(risky)}, believed median "
            f"{statistics.median(r['believed'] for r in risky if r['believed'] is not None):.3f}, "
            f"tried median {statistics.median(r['tried'] for r in risky)}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"summaries": summaries}, fh, indent=1)


if __name__ == "__main__":
    main()
