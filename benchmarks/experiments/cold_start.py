"""Cold start: `portfolio plan` on a small task as a new process, against the raw Fast Downward driver on it.

    python -m benchmarks.experiments.cold_start [--rounds 7] [--domain D --problem P] [--imports] [--checkout DIR]

Each round runs both once, alternating which goes first, each a fresh process timed from spawn to exit with
bytecode caching on (`child_env`): the CLI (`portfolio plan D P --no-cache`: the console script of this
interpreter's environment, translating afresh like the driver; its default cascade, whose Fast Downward starts
with lama-first) and the driver (`fast-downward.py --alias lama-first D P` from the up-fast-downward wheel, in a
scratch folder). Prints each round, the medians and the ratio CLI / driver. `--imports` also lists the modules
of `HEAVY` (what a plain plan needs none of) that the CLI imports (`python -X importtime -m portfolio.cli plan
...` shows what each costs); `--checkout DIR` times the CLI of another checkout's sources (a before/after).
Blocks 4-0 from tests/data is the default task.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from portfolio.benchsuite.order import interleaved
from portfolio.benchsuite.planners import driver_script

REPO = Path(__file__).resolve().parents[2]
BLOCKS = REPO / "tests" / "data" / "ipc" / "blocks"
# what a plain `portfolio plan` (no trace store, a PDDL task) needs none of: the service and the other commands'
# options, the learning stack, the trace store's SQLite layer, the JSON task's models, pydantic (the results'
# model methods load it on first use: `portfolio.engine.wire_model`) (tests/test_front_door.py checks the CLI
# imports none of them)
HEAVY = (
    "fastapi", "starlette", "uvicorn", "httpx", "sklearn", "scipy", "numpy", "sqlite_utils",
    "learning.retrain", "traces.store", "domains.json_task", "asyncio", "portfolio.serve.quotas",
    "portfolio.commands.serve_cmd", "portfolio.commands.bench_cmd", "pydantic",
)  # fmt: skip


def cli_command(domain: Path, problem: Path, checkout: Path | None = None) -> list[str]:
    """The console script of this environment, or with `checkout` `python -m portfolio.cli` run from that
    checkout's sources (another commit's worktree: `PYTHONPATH` goes before the editable install)."""
    script = Path(sys.executable).parent / "portfolio"
    command = [str(script)] if script.exists() and checkout is None else [sys.executable, "-m", "portfolio.cli"]
    return [*command, "plan", str(domain), str(problem), "--no-cache"]


def driver_command(domain: Path, problem: Path) -> list[str]:
    return [sys.executable, str(driver_script()), "--alias", "lama-first", str(domain), str(problem)]


CHECKOUT: Path | None = None  # --checkout


def child_env() -> dict[str, str]:
    """This environment, with bytecode caching on: an installed CLI runs from its `__pycache__`, as the driver
    does from the wheel's; under PYTHONDONTWRITEBYTECODE every run of this checkout would compile its sources
    again (~30 ms a run here), which no user pays. The untimed first runs write the caches."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if CHECKOUT is not None:
        env["PYTHONPATH"] = str(CHECKOUT)
    return env


def timed(command: list[str], workdir: Path) -> float:
    """Wall seconds of `command` from spawn to exit; a failed run is an error, not a time."""
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=workdir, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    return elapsed


def paired(domain: Path, problem: Path, rounds: int) -> tuple[list[float], list[float]]:
    """(CLI seconds, driver seconds) per round, the two alternating which runs first."""
    cli, driver = [], []
    with tempfile.TemporaryDirectory(prefix="cold-start-") as name:
        workdir = Path(name)
        commands = {"cli": cli_command(domain, problem, CHECKOUT), "driver": driver_command(domain, problem)}
        times: dict[str, list[float]] = {"cli": cli, "driver": driver}
        for which in commands:  # one untimed run each: the OS's file cache, not the first round, pays for disk
            timed(commands[which], workdir)
        # one task, so with `rotate` the arm that goes first alternates from round to round
        for round_, _, order in interleaved([(domain, problem)], list(commands), rounds, rotate=True):
            for which in order:
                times[which].append(timed(commands[which], workdir))
            print(f"round {round_ + 1}: cli {cli[-1] * 1000:7.1f} ms   driver {driver[-1] * 1000:7.1f} ms", flush=True)
    return cli, driver


def heavy_imports(domain: Path, problem: Path) -> list[str]:
    """The `HEAVY` modules in `sys.modules` after one `portfolio plan` (`-X importtime` shows how long each took,
    but misses a module a C extension imports: numpy under scipy)."""
    argv = cli_command(domain.resolve(), problem.resolve())[-4:]  # plan D P --no-cache
    code = (
        "import sys; from portfolio.cli import main; main(sys.argv[1:]); "
        f"print('imported:', *sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    with tempfile.TemporaryDirectory(prefix="cold-start-") as workdir:  # not the checkout's cwd on sys.path
        done = subprocess.run(
            [sys.executable, "-c", code, *argv], cwd=workdir, capture_output=True, text=True, env=child_env()
        )
    [line] = [line for line in done.stdout.splitlines() if line.startswith("imported:")]
    return line.split()[1:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--domain", type=Path, default=BLOCKS / "domain.pddl")
    parser.add_argument("--problem", type=Path, default=BLOCKS / "probBLOCKS-4-0.pddl")
    parser.add_argument("--imports", action="store_true", help="also list the heavy modules the CLI imports")
    parser.add_argument(
        "--checkout", type=Path, default=None, help="time the CLI of another checkout's sources (a before/after)"
    )
    args = parser.parse_args(argv)
    global CHECKOUT
    CHECKOUT = args.checkout.resolve() if args.checkout else None
    print(f"cores: {os.cpu_count()}, load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    cli, driver = paired(args.domain.resolve(), args.problem.resolve(), args.rounds)
    cli_ms, driver_ms = statistics.median(cli) * 1000, statistics.median(driver) * 1000
    print(f"median cli {cli_ms:.1f} ms   median driver {driver_ms:.1f} ms   ratio {cli_ms / driver_ms:.2f}")
    if args.imports:
        heavy = heavy_imports(args.domain, args.problem)
        print("heavy modules imported by portfolio plan:", ", ".join(heavy) or "none")


if __name__ == "__main__":
    main()
