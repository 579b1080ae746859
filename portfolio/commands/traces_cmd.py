"""`portfolio traces import|export|stats|backup|vacuum`: thin layers over `traces.TraceStore`, `traces.jsonl` and
`traces.maintenance`."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from portfolio.commands.common import add_traces_argument, fail_bad_input, missing_store
from traces.targets import redact

log = logging.getLogger(__name__)
T = TypeVar("T")

EXIT_PARTIAL = 1  # import: good lines imported, some bad lines skipped (listed on stderr)

STEP_EXAMPLE = (
    '{"run_id": "r1", "step": 0, "action": "drive", "args": ["t1", "a", "b"], "outcome": "success", '
    '"error": null, "duration_ms": 12.5, "features": {"weather": "rain"}, "timestamp": "2026-01-01T00:00:00Z"}'
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "traces", help="import, export and summarise execution traces",
        description="The trace store is one SQLite file of executed steps (and runs, plans, learned models). "
        "Several processes may write to it at once.",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="traces_command", metavar="{import,export,stats,backup,vacuum}")
    commands.required = True

    imp = commands.add_parser(
        "import", help="import steps from a JSONL or CSV file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Import executed steps, one JSON object per line, e.g.\n\n  " + STEP_EXAMPLE + "\n\n"
        "\"action\": \"(drive t1 a b)\", a step as the plan spelled it, is the same record.\n"
        "error, duration_ms, features, timestamp, failure_category, side_effects, expected_effects, "
        "observed_effects and generation are optional (`portfolio schema step` prints the full schema).\n\n"
        "A FILE ending in .csv is read as CSV: a header row of those field names, one step per row, e.g.\n\n"
        "  run_id,step,action,outcome,duration_ms,weather\n  r1,0,(drive t1 a b),success,1200,rain\n\n"
        "features and the effects lists as JSON, args space-separated, an empty cell a field left out, and a\n"
        "column that is no field of a step (weather) a feature.\n\n"
        "A step is identified by run_id and step: one already recorded exactly so is skipped (importing a file\n"
        "twice changes nothing), one recorded with other content is a conflict, listed like a bad line.\n\n"
        "Exit codes: 0 every line imported or already recorded; 1 good lines imported, bad or conflicting lines\n"
        "skipped and listed on stderr; 2 nothing imported (unreadable file, bad database, or a bad or\n"
        "conflicting line with --strict).",
    )  # fmt: skip
    imp.add_argument("file", metavar="FILE", help="JSONL file of step records (or .csv: CSV, one step per row)")
    imp.add_argument("--strict", action="store_true", help="refuse the whole file if any line is bad")
    add_traces_argument(imp)
    imp.set_defaults(func=run_import)

    exp = commands.add_parser(
        "export",
        help="write every step as JSONL",
        description="Write every stored step as one JSON object per line, oldest first (the import format).",
    )
    exp.add_argument("--output", "-o", metavar="FILE", help="output file (default: stdout)")
    add_traces_argument(exp)
    exp.set_defaults(func=run_export)

    stats = commands.add_parser(
        "stats",
        help="per action: steps, failure rate, mean duration (all, successes, failures)",
        description="Per action name: how many steps ran, the share that failed, and their mean duration: of "
        "all steps, of the successes and of the failures (a timeout fails slowly, a refusal fast).",
    )
    stats.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    add_traces_argument(stats)
    stats.set_defaults(func=run_stats)

    backup = commands.add_parser(
        "backup", help="copy the database to a new file, safely while others write",
        description="Copy the trace database to DEST with SQLite's online backup API: one consistent snapshot, "
        "taken while other processes keep writing. DEST must not exist yet. Never copy a live trace database "
        "with cp: the newest commits may still be in its -wal file.",
    )  # fmt: skip
    backup.add_argument("dest", metavar="DEST", help="path of the new database file")
    add_traces_argument(backup)
    backup.set_defaults(func=run_backup)

    vacuum = commands.add_parser(
        "vacuum", help="compact the database file",
        description="Rebuild the trace database without free pages (after `portfolio retrain --keep N` pruned "
        "old models, say) and truncate its -wal file. Waits for other writers like any write.",
    )  # fmt: skip
    add_traces_argument(vacuum)
    vacuum.set_defaults(func=run_vacuum)


def store_errors_exit_2(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A trace store error anywhere in `command` is a one-paragraph message and exit code 2."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        from traces.errors import TraceStoreError

        try:
            return command(args)
        except TraceStoreError as error:
            return fail_bad_input(str(error))

    return run


def _on_store(args: argparse.Namespace, work: Callable[[Any], T], create: bool = False) -> T:
    """`work(store)` on the --traces store, opened for it and closed after; a store that does not exist is
    refused (TraceStoreError) unless `create` (an import makes one)."""
    from traces.errors import TraceStoreError
    from traces.store import TraceStore

    problem = None if create else missing_store(args.traces)
    if problem is not None:
        raise TraceStoreError(problem)
    with TraceStore(args.traces) as store:
        return work(store)


@store_errors_exit_2
def run_import(args: argparse.Namespace) -> int:
    from traces.jsonl import import_jsonl

    report = _on_store(args, lambda store: import_jsonl(store, args.file, strict=args.strict), create=True)
    skipped = f", skipped {report.skipped} already recorded" if report.skipped else ""
    print(f"imported {report.imported} step(s) from {args.file} into {redact(args.traces)}{skipped}")
    if report.problems:
        for line, message in report.problems:
            print(f"{args.file}:{line}: skipped: {message}", file=sys.stderr)
        print(
            f"{len(report.problems)} bad or conflicting line(s) skipped (use --strict to refuse the file)",
            file=sys.stderr,
        )
        return EXIT_PARTIAL
    return 0


@store_errors_exit_2
def run_export(args: argparse.Namespace) -> int:
    from traces.jsonl import export_jsonl

    try:
        count = _on_store(args, lambda store: export_jsonl(store, args.output))
    except BrokenPipeError:
        raise  # stdout's reader went away: `portfolio.cli.main` exits 0 quietly
    except OSError as error:
        return fail_bad_input(f"{args.output}: cannot write the export ({error.strerror}).")
    if args.output:
        print(f"exported {count} step(s) to {args.output}")
    return 0


@store_errors_exit_2
def run_stats(args: argparse.Namespace) -> int:
    stats = _on_store(args, lambda store: store.stats())
    if args.json:
        print(json.dumps([s.model_dump() for s in stats], indent=2))
        return 0
    if not stats:
        print(f"no steps in {redact(args.traces)}")
        return 0
    width = max(len("action"), *(len(s.action) for s in stats))
    header = f"{'steps':>8}  {'failure rate':>12}  {'mean ms':>9}  {'success ms':>10}  {'failure ms':>10}"
    print(f"{'action':<{width}}  {header}")
    for s in stats:
        mean, ok, failed = (
            "-" if ms is None else f"{ms:.1f}" for ms in (s.mean_duration_ms, s.mean_success_ms, s.mean_failure_ms)
        )
        print(f"{s.action:<{width}}  {s.steps:>8}  {s.failure_rate:>12.3f}  {mean:>9}  {ok:>10}  {failed:>10}")
    return 0


@store_errors_exit_2
def run_backup(args: argparse.Namespace) -> int:
    from traces.maintenance import backup

    size = _on_store(args, lambda store: backup(store, args.dest))
    print(f"backed up {redact(args.traces)} to {args.dest} ({size / 1e6:.1f} MB)")
    return 0


@store_errors_exit_2
def run_vacuum(args: argparse.Namespace) -> int:
    from traces.maintenance import vacuum

    before, after = _on_store(args, vacuum)
    print(f"vacuumed {redact(args.traces)}: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0
