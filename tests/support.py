"""Helpers the tests share (paths to the IPC tasks committed under tests/data, IPC problem picking, process
trees read with psutil, waiting on a condition: `wait_until`, `poll`), imported as `from support import ...`;
fixtures stay in conftest.py. `portfolio` runs the CLI in a process of its own; `example` imports a script of
examples/ (the user docs the tests re-run, rather than copy). Also the process-marker helpers the
benchmark-runner tests share and the one-step trace record the estimator tests build traces from."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import psutil

from domains.model import GroundAction
from traces import StepRecord

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
# The few IPC domains and problems the tests use, committed so that a fresh clone needs nothing beside it
# (tests/data/ipc/README.md says which and why); the full sets are for benchmarks only.
DATA = REPO / "tests" / "data"
IPC = DATA / "ipc"
IPC_MORE = DATA / "ipc-more"
IPPC = DATA / "ippc"
EXAMPLES = REPO / "examples"


def example(name: str) -> ModuleType:
    """`examples/<name>.py` as a module (its `main` not run): a test builds on the example's problem, so the
    script users copy is the one the tests check."""
    spec = importlib.util.spec_from_file_location(f"examples.{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def portfolio(*args: object, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m portfolio.cli ARGS` (each as `str`) run from the checkout, its output captured as text; `env`:
    more environment. The exit code is the caller's to assert."""
    return subprocess.run(
        [sys.executable, "-m", "portfolio.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def ipc_domains() -> list[str]:
    return sorted(p.name for p in IPC.iterdir() if (p / "domain.pddl").exists())


def smallest_problems(domain: str, count: int) -> list[Path]:
    """The `count` smallest problem files of an IPC domain (by size: a fair proxy for difficulty)."""
    problems = [p for p in (IPC / domain).glob("*.pddl") if p.name != "domain.pddl"]
    return sorted(problems, key=lambda p: (p.stat().st_size, p.name))[:count]


def hardest_parking() -> Path:
    """The largest parking problem: Fast Downward's translation alone takes about 10 s here, so a 1 s budget runs
    out on any machine. (The smallest one takes 3 s in all: on a machine 3x faster it might fit a budget.)"""
    return max((IPC / "parking-sat11-strips").glob("pfile*.pddl"), key=lambda p: (p.stat().st_size, p.name))


def load_ipc(domain: str, problem: Path | str):
    from domains.load import load_task

    return load_task(IPC / domain / "domain.pddl", IPC / domain / problem)


def poll(probe: Callable[[], T], done: Callable[[T], object], timeout: float, every: float = 0.02) -> T:
    """Call `probe` every `every` seconds until `done` holds for its value or `timeout` seconds have passed; the
    last value (the caller asserts on it, so a failure shows what was there)."""
    deadline = time.monotonic() + timeout
    while not done(value := probe()) and time.monotonic() < deadline:
        time.sleep(every)
    return value


def wait_until(condition: Callable[[], T], timeout: float = 30.0, what: str = "condition", every: float = 0.02) -> T:
    """Wait until `condition()` is truthy and return its value; an AssertionError naming `what` after `timeout`
    seconds. The timeout only bounds a hang: the test asserts the condition, not how soon it held."""
    value = poll(condition, bool, timeout, every)
    assert value, f"timed out after {timeout:g} s waiting for {what}"
    return value


def descendants(pid: int | None = None) -> dict[int, tuple[str, float]]:
    """Live descendant processes of `pid` (default: this process): pid -> (psutil's status, as
    `psutil.STATUS_RUNNING`, cpu seconds used)."""
    try:
        below = psutil.Process(pid or os.getpid()).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    found: dict[int, tuple[str, float]] = {}
    for process in below:
        try:
            with process.oneshot():
                status, cpu = process.status(), process.cpu_times()
        except psutil.Error:  # ended between the listing and the read
            continue
        if status != psutil.STATUS_ZOMBIE:
            found[process.pid] = (status, cpu.user + cpu.system)
    return found


def running(pid: int | None = None) -> list[int]:
    """The descendants of `pid` (default: this process) on a CPU or ready to run, as psutil reads their status."""
    return [child for child, (status, _) in descendants(pid).items() if status == psutil.STATUS_RUNNING]


def marked_processes(marker: str) -> list[int]:
    """Live processes whose environment carries `marker` (every descendant of a run inherits it)."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            environment = process.environ()
            if any(marker in f"{name}={value}" for name, value in environment.items()):
                if process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process.pid)
        except psutil.Error:  # ended, or not ours to read
            continue
    return found


def wait_gone(marker: str, seconds: float = 10.0) -> list[str]:
    """The command lines of marked processes still alive after `seconds` (empty: all gone)."""
    lines = []
    for pid in poll(lambda: marked_processes(marker), lambda left: not left, seconds, every=0.1):
        try:
            lines.append(f"{pid}: " + " ".join(psutil.Process(pid).cmdline()))
        except psutil.Error:
            pass
    return lines


def rec(i: int, action: GroundAction, failed: bool, **features) -> StepRecord:
    return StepRecord(
        run_id=f"r{i}",
        step=0,
        action=action.name,
        args=action.args,
        outcome="failure" if failed else "success",
        features=features,
    )


def record(store, action: str, args: tuple[str, ...], outcomes: list[str], run: str) -> None:
    """Record one run of steps of `action` with `args` into `store`, one step per outcome ("success", ...)."""
    from traces.records import StepRecord

    store.record_steps(
        [
            StepRecord(run_id=run, step=i, action=action, args=args, outcome=outcome)
            for i, outcome in enumerate(outcomes)
        ]
    )


def trained_store(path: Path, action: str, runs: Iterable[tuple[str, tuple[str, ...], str, dict]]) -> Path:
    """A trace store at `path` holding, for each (run id, args, outcome, features) of `runs`, a run of one step of
    `action`, and a failure model retrained on them (version 1)."""
    from learning.retrain import retrain
    from traces.store import TraceStore

    with TraceStore(path) as store:
        store.record_steps(
            StepRecord(run_id=run_id, step=0, action=action, args=args, outcome=outcome, features=features)
            for run_id, args, outcome, features in runs
        )
        retrain(store)
    return path


def pick_up_model_store(path: Path) -> Path:
    """`trained_store` of blocks' pick-up: 30 one-step runs a block (a to d), pick-up of b failing one time in
    five."""
    runs = ((f"r{i}", (x,), "failure" if x == "b" and i % 5 == 0 else "success", {}) for i in range(30) for x in "abcd")
    return trained_store(path, "pick-up", runs)


# -- a throw-away PostgreSQL cluster -------------------------------------------------------------------------------

BACKENDS = ["sqlite", "postgresql"]  # what `store_target` (conftest.py) and a module's own store fixture run on
POSTGRES_BIN_DIRS = ("/usr/lib/postgresql",)  # Debian's layout: /usr/lib/postgresql/<major>/bin


def postgres_bin() -> Path | None:
    """The directory of PostgreSQL's server programs (`initdb`, `pg_ctl`): PATH's, else the newest of Debian's
    versioned ones; None when PostgreSQL is not installed."""
    import shutil

    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(
        (p for root in POSTGRES_BIN_DIRS if Path(root).is_dir() for p in Path(root).iterdir()),
        key=lambda p: int(p.name) if p.name.isdigit() else 0,
    )
    for version in reversed(versions):
        if (version / "bin" / "pg_ctl").exists() and (version / "bin" / "initdb").exists():
            return version / "bin"
    return None


class PostgresCluster:
    """A PostgreSQL cluster in a scratch directory, for one test session (one per pytest-xdist worker: each
    starts its own on a free port, so workers share nothing and need no lock). `initdb` refuses to run as root:
    as root, the server's programs run as the `postgres` user, which owns the data directory. Trust
    authentication on 127.0.0.1 and a Unix socket inside the directory; fsync off (a crash loses nothing a test
    needs). `database()` creates a fresh database and returns its URL; `stop()` stops the server and removes
    the directory."""

    def __init__(self, bin_dir: Path) -> None:
        import shutil
        import socket
        import tempfile

        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="portfolio-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:  # the postgres user must reach the directory and own the cluster's files
            self.root.chmod(0o755)
            self.data.mkdir(mode=0o700)
            shutil.chown(self.data, "postgres", "postgres")
            self.log.touch()
            shutil.chown(self.log, "postgres", "postgres")
        try:
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                      "--no-sync", "--encoding=UTF8", "--locale=C.UTF-8")  # fmt: skip
            # a port free when looked at may be taken before the server binds it (by a client's connection from
            # the same ephemeral range): the server's log says so, and another port is tried
            for attempt in range(5):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", 0))
                    self.port = probe.getsockname()[1]
                logged = self.log.stat().st_size if self.log.exists() else 0
                try:
                    self.start()
                    break
                except RuntimeError:
                    said = self.log.read_bytes()[logged:].decode(errors="replace")
                    if attempt == 4 or "Address already in use" not in said:
                        raise
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}"
        self._count = 0

    def _run(self, *command: str) -> None:
        import shlex

        if self.as_postgres:
            command = ("su", "postgres", "-s", "/bin/sh", "-c", shlex.join(command))
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def database(self, prefix: str = "t") -> str:
        """The URL of a new, empty database."""
        import psycopg

        self._count += 1
        name = f"{prefix}_{os.getpid()}_{self._count}"
        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return f"{self.url}/{name}"

    def database_with_password(self, role: str, password: str) -> str:
        """A new database owned by a new `role` that must log in with `password` (scram-sha-256: the cluster
        trusts everyone else); its URL, the password in it."""
        import psycopg

        url = self.database(role)
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(f"{self.url}/postgres", autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
            admin.execute(f'ALTER DATABASE "{name}" OWNER TO {role}')
            hba = self.data / "pg_hba.conf"
            hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
            admin.execute("SELECT pg_reload_conf()")
        return f"postgresql://{role}:{password}@127.0.0.1:{self.port}/{name}"

    def restart(self) -> None:
        """Stop the server (fast: every connection is cut) and start it again on the same port."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        self.start()

    def restart_command(self) -> str:
        """A shell command that restarts the server (fast: every connection cut; the options it was started
        with kept), as the `postgres` user when the tests run as root: for a program that takes a command."""
        import shlex

        command = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-l", str(self.log), "restart"]
        if self.as_postgres:
            return shlex.join(["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(command)])
        return shlex.join(command)

    def stop_server(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def start(self) -> None:
        options = f"-k {self.data} -c listen_addresses=127.0.0.1 -p {self.port} -c fsync=off -c max_connections=200"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start")

    def stop(self) -> None:
        import shutil

        if not self.root.exists():
            return  # stopped already (the fixture's teardown, then atexit)
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            pass  # never started, or already stopped
        shutil.rmtree(self.root, ignore_errors=True)
