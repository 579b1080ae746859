"""`portfolio retrain`: fit a tenant's failure model on its stored steps (or each tenant's, or one of them all),
and the configuration selection model on every plan recorded with its domain, and store each as its next
version; one retrain of a store at a time (`traces.fleet_lock`), the servers' included."""

from __future__ import annotations

import argparse
import json
import math

from learning.defaults import DEFAULT_CHANGE_ODDS, DEFAULT_STALE_HALF_LIFE
from portfolio.commands.common import (
    add_tenant_arguments,
    add_traces_argument,
    fail_bad_input,
    learning_tenant,
    missing_store,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "retrain", help="learn which actions fail, and which searches solve each domain first, from the traces",
        description="Fit a per-action failure model on a tenant's stored steps (each grounded action judged on its "
        "steps since its failure rate last changed; what the plans stopped using drifts back to its prior), measure "
        "it on the newest 20% of steps held out, and store it as the tenant's next model version (as JSON data). "
        "The tenant is the default one, whose steps the CLI and the Python API record, unless --tenant, --pooled "
        "or --all-tenants chooses others. Each "
        "grounded action's failure rate is shrunk towards a prior learned from what it shares with others "
        "(objects, pairs of arguments, the situation), by a strength m fit per action; with 30 steps or more it "
        "stays within 0.05 of its own observed rate. The planner's learned costs use the latest version: "
        "cost = base cost + lam * -log(1 - p_fail). "
        "It also fits the configuration selection: per domain (the hash of the domain file) with at least "
        "--min-tasks recorded tasks, which Fast Downward searches to race on the next task, ranked by the mean "
        "time to a first plan their race would have had on the recorded tasks (tasks of a similar size weigh "
        "more; a task the race did not solve counts twice the longest time recorded on it). `portfolio plan "
        "--traces` races them; other domains keep the fixed order (lama-first, eager-ff-cg, lazy-cea, lazy-add). "
        "Where tasks were recorded with translator flags too (attempts' details.translator), the flags whose tasks "
        "reached a plan sooner (by 5% or more) are used before translating the next task of the domain; "
        "otherwise the driver's default translation. "
        "Either model alone is enough: exit 2 only when the store holds neither steps nor such plans. "
        "Steps posted to `portfolio serve` are reviewed first: a batch of one principal's steps whose failure "
        "rate departs sharply from what the last model knew of the action, while no other source's recent "
        "steps on it agree, is held back from the fit and listed (--include-held fits it, --no-poison-guard "
        "turns the review off).",
    )  # fmt: skip
    add_traces_argument(parser)
    add_tenant_arguments(parser, "fit", every=True)
    parser.add_argument(
        "--include-held",
        action="store_true",
        help="fit the batches the poison guard held back from the last model too (newly recorded steps are still "
        "reviewed)",
    )
    parser.add_argument(
        "--no-poison-guard",
        dest="poison_guard",
        action="store_false",
        help="fit every step, held back before or not, without reviewing them",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="while another retrain of the store runs (a `portfolio serve` sharing it, another `portfolio "
        "retrain`), wait for it to end, then fit; without it, exit 2 at once. One retrain of a store at a time",
    )
    parser.add_argument("--json", action="store_true", help="print the model info as JSON")
    parser.add_argument(
        "--half-life",
        type=float,
        default=5000.0,
        metavar="STEPS",
        help="a step's weight halves every STEPS later steps of its action (default 5000)",
    )
    parser.add_argument(
        "--stale-half-life",
        type=_none_or_float,
        default=DEFAULT_STALE_HALF_LIFE,
        metavar="GAPS",
        help="the evidence of a grounded action the plans no longer use halves for every GAPS of its usual gaps "
        "between uses, so that it drifts back to its prior and is tried again; 'none': never (default "
        f"{DEFAULT_STALE_HALF_LIFE:g})",
    )
    parser.add_argument(
        "--change-odds",
        type=_none_or_float,
        default=DEFAULT_CHANGE_ODDS,
        metavar="ODDS",
        help="cut a grounded action's record where a change of its failure rate is ODDS times as likely as none, "
        f"and learn from the steps since; 'none': never (default {DEFAULT_CHANGE_ODDS:g})",
    )
    parser.add_argument(
        "--prior-mean",
        type=float,
        default=0.05,
        metavar="P",
        help="optimistic prior failure probability for little-seen actions (default 0.05)",
    )
    parser.add_argument(
        "--prior-strength",
        type=float,
        default=10.0,
        metavar="N",
        help="how many pseudo-steps the prior weighs for an action with few groundings "
        "seen (default 10; otherwise m is fit from the data)",
    )
    parser.add_argument(
        "--min-tasks",
        type=int,
        default=3,
        metavar="N",
        help="recorded tasks a domain needs before its searches are selected (default 3)",
    )
    parser.add_argument(
        "--keep",
        type=int,
        metavar="N",
        help="then delete all but the newest N model versions, of each kind (default: keep all)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from learning.retrain import NoTrainingDataError
    from learning.selection import retrain_selection
    from learning.tenant_models import retrain_tenants
    from traces.errors import TraceStoreError
    from traces.fleet_lock import FleetBusy, fleet_lock
    from traces.selection import prune_selection_models
    from traces.store import TraceStore

    if args.keep is not None and args.keep < 1:
        return fail_bad_input(f"--keep must be at least 1 (the planner loads the newest model), got {args.keep}.")
    # nan and inf passed `<= 0` and ended in scikit-learn's traceback
    finite = all(math.isfinite(v) for v in (args.prior_mean, args.prior_strength, args.half_life))
    if not finite or not 0.0 < args.prior_mean < 1.0 or args.prior_strength <= 0 or args.half_life <= 0:
        return fail_bad_input(
            "--prior-mean must be between 0 and 1 (exclusive), --prior-strength and --half-life finite and "
            f"positive; got {args.prior_mean:g}, {args.prior_strength:g} and {args.half_life:g}."
        )
    if args.min_tasks < 1:
        return fail_bad_input(f"--min-tasks must be at least 1, got {args.min_tasks}.")
    if args.stale_half_life is not None and not (math.isfinite(args.stale_half_life) and args.stale_half_life > 0):
        return fail_bad_input(f"--stale-half-life must be positive and finite, or none; got {args.stale_half_life:g}.")
    if args.change_odds is not None and not (math.isfinite(args.change_odds) and args.change_odds > 1):
        return fail_bad_input(f"--change-odds must be a finite number above 1, or none; got {args.change_odds:g}.")
    params = dict(
        prior_mean=args.prior_mean,
        prior_strength=args.prior_strength,
        half_life_steps=args.half_life,
        stale_half_life=args.stale_half_life,
        change_odds=args.change_odds,
        guard=args.poison_guard,
        include_held=args.include_held,
    )
    tenants = None if args.all_tenants else [learning_tenant(args)]
    if (problem := missing_store(args.traces)) is not None:
        return fail_bad_input(problem)
    try:
        with TraceStore(args.traces) as store, fleet_lock(store, "retrain", wait=args.wait):
            try:
                infos, no_steps = retrain_tenants(store, tenants, **params), None
            except NoTrainingDataError as error:
                infos, no_steps = {}, error
            selection = retrain_selection(store, min_tasks=args.min_tasks)
            if not infos and not selection.domains:
                return fail_bad_input(
                    f"{no_steps} No plans recorded with their domain either (`portfolio plan "
                    "--traces FILE` records them), so no configuration selection to fit."
                )
            pruned = store.prune_models(args.keep) if args.keep is not None and infos else 0
            if args.keep is not None:
                prune_selection_models(store, args.keep)
    except TraceStoreError as error:
        return fail_bad_input(str(error))
    except FleetBusy:
        return fail_bad_input(
            "a retrain is running on this trace store (a `portfolio serve` sharing it, or another `portfolio "
            "retrain`); its models are stored when it ends. Run again then, or pass --wait to wait for it."
        )
    if args.json:
        if args.all_tenants:
            out = {"models": {tenant: info.model_dump(mode="json") for tenant, info in infos.items()}}
        else:
            out = next(iter(infos.values())).model_dump(mode="json") if infos else {}
        print(json.dumps(out | {"selection": selection.model_dump(mode="json")}, indent=2))
        return 0
    for i, info in enumerate(infos.values()):
        named = args.all_tenants or info.tenant != "default"
        print_failure_model(info, pruned if i == 0 else 0, args.keep, named=named)
    print_selection(selection)
    return 0


def print_failure_model(info, pruned: int, keep: int | None, named: bool = False) -> None:
    metrics = info.metrics
    whose = ("pooled model" if info.tenant == "*" else f"tenant {info.tenant}") + ": " if named else ""
    if info.unchanged:
        print(f"{whose}model version {info.version} stands: no step recorded since")
        return
    print(
        f"{whose}model version {info.version}: {info.n_steps} steps, {len(info.actions)} action(s), "
        f"trained in {info.train_seconds:.1f} s"
    )
    if pruned:
        print(f"pruned {pruned} old model version(s), kept the newest {keep}")
    if metrics:
        auc = "n/a" if metrics.get("auc") is None else f"{metrics['auc']:.3f}"
        print(
            f"held-out ({metrics['heldout_steps']} newest steps): log loss {metrics['log_loss']:.4f}, "
            f"Brier {metrics['brier']:.4f}, AUC {auc}"
        )
    for name, counts in info.actions.items():
        print(
            f"  {name}: {counts['steps']} steps, {counts['failures']} failures "
            f"({counts['kind']} prior, strength m = {counts['strength']:g})"
        )
    if info.changes:
        print(f"  {info.changes} change(s) of a failure rate found: estimates rest on the steps since")
    for held in info.held:
        print(
            f"  held back: {held.steps} steps of {held.action} from {held.principal!r} (tenant {held.tenant}), "
            f"{held.failures} failures where p_fail {held.expected_p_fail:.3f} was expected (p = "
            f"10^{held.log10_p:.0f}) and no other agent agrees; --include-held fits them"
        )


def _none_or_float(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None


def print_selection(selection) -> None:
    if not selection.domains:
        print(
            f"configuration selection: no domain has enough recorded tasks yet ({selection.skipped_domains} "
            "domain(s) recorded); the fixed order stays"
        )
        return
    print(
        f"selection model version {selection.version}: {len(selection.domains)} domain(s)"
        + (f", {selection.skipped_domains} with too few tasks" if selection.skipped_domains else "")
    )
    for domain, entry in selection.domains.items():
        configs = ", ".join(
            f"{name} solved {c['solved']}" + (f" (median {c['median_s']:.2f} s)" if c["solved"] else "")
            for name, c in entry["configs"].items()
        )
        translator = f" (translator {' '.join(entry['translator'])})" if entry.get("translator") else ""
        print(
            f"  domain {domain}: {entry['tasks']} tasks -> race {', '.join(entry['ranking'] or [])}{translator}; "
            f"{configs}"
        )
