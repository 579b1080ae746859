"""Store soak: a long-lived runtime and cron jobs sharing one trace database, the way it was found breaking.

One process (this one) keeps opening `TraceStore`s and `Agent`s on the same file and keeps the old ones alive,
writing through all of them; two other processes, like cron jobs, open the file, import a batch or retrain the
failure model, and close it again. Every batch is counted, and at the end a third process (the checker) counts
what is in the file and runs `PRAGMA integrity_check`. Before the fix, the first in-process re-open dropped
this process's POSIX locks, the next cron close deleted the WAL and shared-memory files under live
connections, and runs failed with "disk I/O error" or lost their rows.

    PYTHONPATH=. python -m benchmarks.experiments.store_soak --iterations 200      # the issue's target: 200 clean

`tests/test_store_faults.py` runs the same loop for a few iterations on every `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from domains.typed_actions import action
from traces import StepRecord, TraceStore

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Question:
    text: str


@dataclass
class Person:
    name: str


@dataclass
class Answer:
    text: str


@action(cost=1.0)
def find_person(question: Question) -> Person:
    return Person(question.text.split()[0])


@action(goal=True)
def answer(person: Person) -> Answer:
    return Answer(f"{person.name}: ok")


def batch(tag: str, n: int) -> list[StepRecord]:
    """`n` steps of one run `tag`: every one must land, or none of them."""
    return [
        StepRecord(
            run_id=tag,
            step=i,
            action="drive",
            args=("t1", "a", "b"),
            outcome="failure" if i % 5 == 0 else "success",
            duration_ms=1.0,
        )
        for i in range(n)
    ]


# -- the cron side: a helper process that opens, works and closes per command ---------------------------------


def serve(path: str) -> None:
    """Read commands from stdin (`import TAG N`, `retrain`, `check`); each opens the store, works and closes it."""
    for line in sys.stdin:
        words = line.split()
        try:
            with TraceStore(path) as store:
                if words[0] == "import":
                    store.record_steps(batch(words[1], int(words[2])))
                    reply = "ok"
                elif words[0] == "retrain":
                    from learning.retrain import retrain

                    reply = f"ok {retrain(store).version}"
                else:
                    counts = dict(store.db.execute("SELECT run_id, count(*) FROM steps GROUP BY run_id").fetchall())
                    integrity = store.db.execute("PRAGMA integrity_check").fetchone()[0]
                    reply = "ok " + json.dumps({"counts": counts, "integrity": integrity})
        except Exception as error:  # reported to the driver, which counts it as a failed iteration
            reply = f"error {type(error).__name__}: {error}".replace("\n", " ")
        print(reply, flush=True)


class Helper:
    """A helper process (`serve`) and a blocking request/reply over its pipes."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.experiments.store_soak", "--serve", str(path)],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip

    def ask(self, command: str) -> str:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip() or "error helper died"

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)


# -- the runtime side: many stores and agents in this process ---------------------------------------------------


@dataclass
class SoakReport:
    iterations: int
    expected: dict[str, int] = field(default_factory=dict)  # run id -> steps it must have
    found: dict[str, int] = field(default_factory=dict)
    integrity: str = ""
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def lost(self) -> dict[str, tuple[int, int]]:
        """Run id -> (expected, found) wherever they differ."""
        keys = set(self.expected) | set(self.found)
        return {
            k: (self.expected.get(k, 0), self.found.get(k, 0))
            for k in sorted(keys)
            if self.expected.get(k, 0) != self.found.get(k, 0)
        }

    @property
    def clean(self) -> bool:
        return not self.errors and not self.lost and self.integrity == "ok"


def soak(path: Path, iterations: int, *, steps: int = 10, keep: int = 6, retrain_every: int = 4) -> SoakReport:
    """Run the loop `iterations` times on the database at `path`; every failure is collected, not raised. The
    process keeps up to `keep` stores and `keep` agents open, retiring the oldest (a close among live users)."""
    from portfolio.agent import Agent

    report = SoakReport(iterations)
    start = time.perf_counter()
    importer, trainer, checker = Helper(path), Helper(path), Helper(path)
    stores: list[TraceStore] = []
    agents: list = []

    def attempt(what: str, operation) -> None:
        try:
            operation()
        except Exception as error:
            report.errors.append(f"iteration {i} {what}: {type(error).__name__}: {error}")

    def cron(command: str) -> None:
        reply = importer.ask(command) if command.startswith("import") else trainer.ask(command)
        if not reply.startswith("ok"):
            raise RuntimeError(reply)

    def run_agent(agent) -> None:
        result = agent.run(Question(f"Ada {i}"))
        run_id = agent.store.db.execute("SELECT id FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()[0]
        report.expected[run_id] = len(result.steps)

    try:
        for i in range(iterations):
            attempt("open store", lambda: stores.append(TraceStore(path)))
            attempt("open agent", lambda: agents.append(Agent([find_person, answer], traces=path, warm=False)))
            if len(stores) > keep:  # a pool retiring its oldest members while the others stay open
                attempt("close store", stores.pop(0).close)
            if len(agents) > keep:
                attempt("close agent", agents.pop(0).close)
            for k, store in enumerate(stores):
                tag = f"store{k}-{i}"
                report.expected[tag] = steps
                attempt(f"write {tag}", lambda: store.record_steps(batch(tag, steps)))
            for agent in agents:
                attempt("agent run", lambda: run_agent(agent))
            report.expected[f"import-{i}"] = steps
            attempt("import", lambda: cron(f"import import-{i} {steps}"))
            if i % retrain_every == retrain_every - 1:
                attempt("retrain", lambda: cron("retrain"))
                attempt("reload model", agents[-1].planner.reload_model)
        reply = checker.ask("check")
        if reply.startswith("ok"):
            checked = json.loads(reply[3:])
            report.found, report.integrity = checked["counts"], checked["integrity"]
        else:
            report.errors.append(f"check: {reply}")
    finally:
        for agent in agents:
            agent.close()
        for store in stores:
            store.close()
        for helper in (importer, trainer, checker):
            helper.close()
    report.seconds = time.perf_counter() - start
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--db", help="database path (default: a new file in a temporary directory)")
    parser.add_argument("--serve", metavar="PATH", help=argparse.SUPPRESS)  # the helper process
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        report = soak(Path(args.db or Path(folder) / "soak.db"), args.iterations)
    print(
        f"{report.iterations} iterations in {report.seconds:.1f} s: {len(report.errors)} error(s), "
        f"{sum(report.found.values())} of {sum(report.expected.values())} steps found, "
        f"integrity {report.integrity!r}, {len(report.lost)} run(s) short"
    )
    for error in report.errors[:10]:
        print("  " + error)
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
