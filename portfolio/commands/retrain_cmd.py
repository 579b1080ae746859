"""`portfolio retrain`: fit the failure model on every stored step and store it as the next version."""

from __future__ import annotations

import argparse

from portfolio.commands.common import add_traces_argument, fail_bad_input


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "retrain", help="learn which actions fail from the trace store",
        description="Fit a per-action failure model on every stored step (newest steps weigh most), measure it "
        "on the newest 20% of steps held out, and store it as the next model version (as JSON data). Each "
        "grounded action's failure rate is shrunk towards a prior learned from what it shares with others "
        "(objects, pairs of arguments, the situation), by a strength m fit per action; with 30 steps or more it "
        "stays within 0.05 of its own observed rate. The planner's learned costs use the latest version: "
        "cost = base cost + lam * -log(1 - p_fail).",
    )  # fmt: skip
    add_traces_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the model info as JSON")
    parser.add_argument("--half-life", type=float, default=5000.0, metavar="STEPS",
                        help="a step's weight halves every STEPS later steps of its action (default 5000)")
    parser.add_argument("--prior-mean", type=float, default=0.05, metavar="P",
                        help="optimistic prior failure probability for little-seen actions (default 0.05)")
    parser.add_argument("--prior-strength", type=float, default=10.0, metavar="N",
                        help="how many pseudo-steps the prior weighs for an action with few groundings "
                        "seen (default 10; otherwise m is fit from the data)")
    parser.add_argument("--keep", type=int, metavar="N",
                        help="then delete all but the newest N model versions (default: keep all)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from learning.retrain import retrain
    from traces.errors import TraceStoreError
    from traces.store import TraceStore

    if args.keep is not None and args.keep < 1:
        return fail_bad_input(f"--keep must be at least 1 (the planner loads the newest model), got {args.keep}.")
    if not 0.0 < args.prior_mean < 1.0 or args.prior_strength <= 0 or args.half_life <= 0:
        return fail_bad_input(
            "--prior-mean must be between 0 and 1 (exclusive), --prior-strength and --half-life positive."
        )
    params = dict(prior_mean=args.prior_mean, prior_strength=args.prior_strength, half_life_steps=args.half_life)
    try:
        with TraceStore(args.traces) as store:
            info = retrain(store, **params)
            pruned = store.prune_models(args.keep) if args.keep is not None else 0
    except TraceStoreError as error:
        return fail_bad_input(str(error))
    if args.json:
        print(info.model_dump_json(indent=2))
        return 0
    metrics = info.metrics
    print(f"model version {info.version}: {info.n_steps} steps, {len(info.actions)} action(s), "
          f"trained in {info.train_seconds:.1f} s")
    if pruned:
        print(f"pruned {pruned} old model version(s), kept the newest {args.keep}")
    if metrics:
        auc = "n/a" if metrics.get("auc") is None else f"{metrics['auc']:.3f}"
        print(f"held-out ({metrics['heldout_steps']} newest steps): log loss {metrics['log_loss']:.4f}, "
              f"Brier {metrics['brier']:.4f}, AUC {auc}")
    for name, counts in info.actions.items():
        print(f"  {name}: {counts['steps']} steps, {counts['failures']} failures "
              f"({counts['kind']} prior, strength m = {counts['strength']:g})")
    return 0
