"""Helpers the tests share (paths to the IPC tasks committed under tests/data, IPC problem picking, process
trees), imported as `from support import ...`; fixtures stay in conftest.py. Also the process-marker helpers the
benchmark-runner tests share and the one-step trace record the estimator tests build traces from."""

from __future__ import annotations

import os
import time
from pathlib import Path

from domains.model import GroundAction
from traces import StepRecord

REPO = Path(__file__).resolve().parents[1]
# The few IPC domains and problems the tests use, committed so that a fresh clone needs nothing beside it
# (tests/data/ipc/README.md says which and why); the full sets are for benchmarks only.
DATA = REPO / "tests" / "data"
IPC = DATA / "ipc"
IPC_MORE = DATA / "ipc-more"
IPPC = DATA / "ippc"


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


def descendants(pid: int | None = None) -> dict[int, tuple[str, float]]:
    """Live descendant processes of `pid` (default: this process): pid -> (state, cpu seconds used)."""
    root = pid or os.getpid()
    parents: dict[int, int] = {}
    info: dict[int, tuple[str, float]] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        info[int(entry.name)] = (fields[0], (int(fields[11]) + int(fields[12])) / ticks)
    found: dict[int, tuple[str, float]] = {}
    frontier = [root]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current and child not in found and info[child][0] != "Z":
                found[child] = info[child]
                frontier.append(child)
    return found


def marked_processes(marker: str) -> list[int]:
    """Live processes whose environment carries `marker` (every descendant of a run inherits it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def wait_gone(marker: str, seconds: float = 10.0) -> list[str]:
    """The command lines of marked processes still alive after `seconds` (empty: all gone)."""
    deadline = time.monotonic() + seconds
    while (left := marked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = []
    for pid in left:
        try:
            lines.append(f"{pid}: " + (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
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
