"""Two translator workers, CPython and PyPy, raced: small tasks answered by CPython, large ones by a warm PyPy.

Fast Downward's translator is pure Python. Under PyPy (Debian's `pypy3`, 7.3, Python 3.9), warm, it translates
large tasks 2-3x faster than CPython 3.11 (spider p07 1.85 -> 0.75 s, tidybot p05 4.3 -> 1.5 s, tetris p020
1.4 -> 0.6 s, settlers p01 2.9 -> 1.1 s), but small ones more slowly even warm (blocks-4 14 vs 10 ms, gripper-1
12 vs 6 ms) and everything slowly while cold (its first blocks-4: 100 ms). Neither interpreter is the right one
for every task, and which one a task needs is only known once it has been translating for a while. So:

- the CPython worker starts on every task at once (today's path, unchanged);
- a PyPy worker, where one is found (`find_python`), starts on the same task `pypy_after_s` later (0.2 s, 0.1 s
  more while CPython's worker may still be importing), and the first answer wins; the other is stopped. PyPy
  wins only where it is faster by more than its late start, and it is not on mid-size tasks: a PyPy warm on
  every earlier task took 1.09x CPython's time (median) on tasks CPython translates in 0.05-0.1 s, 0.94x at
  0.1-0.2 s, 0.74x at 0.2-0.4 s, 0.65x past 0.8 s (`benchmarks/experiments/coverage_bound.py`, the 255 coverage
  tasks; replayed with PyPy starting d later, 171 tasks fit 1 s for every d from 0.05 to 0.3 s, 169 from 0.5 s).
  Started at 50 ms it was a third process on two cores beside the searches on tasks it could not win (median
  first plan 0.284x the driver's raced, 0.255x CPython alone, 2026-12-03); from 0.2 s it still takes the large
  tasks it wins by seconds, and coverage within 1 s is the same raced or not (161 and 161, then 160 and 160 of
  255; median 0.280x / 0.270x, then 0.271x / 0.242x: the runs differ by as much as the arms);
- the PyPy worker is started the first time a task needs it (small tasks never pay for it: a process with a
  PyPy start-up and imports, ~0.2 s of CPU), and is stopped by a signal, not killed (`portfolio.engine.workers`:
  the abort answers at once under PyPy), so the JIT stays warm across deadlines and races lost;
- CPython's answer is the reference: a PyPy answer that is an error (a recursion limit, memory) is set aside and
  CPython's awaited; a PyPy worker that dies before it ever answered (a translator it cannot import, too old a
  PyPy) is given up on for this process, with a warning.

The SAS text is the same whichever interpreter wrote it (`benchmarks/experiments/sas_compare.py --python`). Which
one answered is in `Translation.translator` and the attempt's `details["translator"]`.

Finding PyPy: `translator_python=` (`--translator-python` on the command line), else `PORTFOLIO_TRANSLATOR_PYTHON`,
else `pypy3` on the PATH; "off" (or "none", "cpython") turns the second worker off. PyPy gets a folder of its own
on its module path holding links to the `portfolio` package and the translator package of this environment, so
it imports them, and nothing else of this environment's site-packages (compiled for CPython).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portfolio.delegates.fast_downward.translate import PRELOAD, TRANSLATE_OP
from portfolio.engine import cancel
from portfolio.engine.results import Resource
from portfolio.engine.workers import BudgetExpired, WorkerCrashed, WorkerError, WorkerProcess

log = logging.getLogger(__name__)

ENV_PYTHON = "PORTFOLIO_TRANSLATOR_PYTHON"
OFF = frozenset({"off", "none", "cpython", ""})
PYPY_AFTER_S = 0.2  # the measurements in the module docstring
# The warm-up: four bundled domains, 0.7 s under a cold PyPy. Measured against one logistics-20 (0.3 s) and none,
# first translation after it (s; CPython 0.74, 1.96, 0.44, 0.39): nurikabe p01 1.01 / 0.85 / 0.67, caldera p06
# 1.42 / 1.47 / 1.27, grid prob03 0.39 / 0.35 / 0.35, data-network p02 0.35 / 0.34 / 0.38; repeating it three
# times (1.2 s) gained 0.0-0.09 s more. A PyPy that has translated a domain once is faster still on it (nurikabe
# 0.3 s).
WARM_UP = (("logistics", 20), ("tools", 3), ("blocksworld", 12), ("gripper", 20))
COLD_START_S = 0.1  # a CPython translator worker's start to its first answer: 65-80 ms measured (imports)
# PyPy sizes its young generation at half the CPU's last-level cache, so the same PyPy is another program on
# another machine: on one reporting a 480 MB L3 (a 2-core VM on a large Xeon) it asked for a 240 MB nursery,
# could not start under a 300 MB address-space cap ("cannot allocate nursery"), so the race gave PyPy up under
# the service's caps, and translated 1.4x more slowly than with 4 MB (10 tasks of 0.03-1.9 s, warm worker,
# twice each: first translations 7.4 s in all by default, 5.3-5.5 s at 4 MB, 5.2-5.3 s at 16 MB, 6.0-6.4 s at
# 64 MB; address-space peak 1236, 355, 444, 690 MB). 4 MB is PyPy's own fallback where it cannot read the cache
# size: within 3% of the fastest, at the least memory.
PYPY_NURSERY = "4MB"
PYPY_ABORT_GRACE_S = 0.5  # measured: PyPy answers an abort at once; past this it is killed


def find_python(configured: str | None = None) -> str | None:
    """The interpreter of the second translator worker, or None: `configured`, else $PORTFOLIO_TRANSLATOR_PYTHON,
    else `pypy3` on the PATH. "off" turns it off; a name that is not an executable raises ValueError."""
    wanted = configured if configured is not None else os.environ.get(ENV_PYTHON)
    if wanted is None:
        return shutil.which("pypy3")
    if wanted.strip().lower() in OFF:
        return None
    found = shutil.which(wanted)
    if found is None:
        flag = "--translator-python" if configured is not None else ENV_PYTHON
        raise ValueError(f"{flag} {wanted!r}: no such executable (expected a path, a name on the PATH, or off)")
    return found


def module_path() -> str:
    """A folder holding links to the `portfolio` package and to the translator package (`fast_downward`) this
    process imports: the second interpreter's whole module path. Made once per pair of targets, shared by every
    process of this user (created under a temporary name, then renamed into place)."""
    spec = importlib.util.find_spec("fast_downward")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("Fast Downward's translator package (fast_downward) is not installed")
    targets = {
        "portfolio": str(Path(__file__).resolve().parents[2]),  # this file is portfolio/delegates/fast_downward/
        "fast_downward": str(Path(list(spec.submodule_search_locations)[0]).resolve()),
    }
    digest = hashlib.sha256(repr(sorted(targets.items())).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"portfolio-translator-path-{os.getuid()}-{digest}"
    if not all((folder / name).exists() for name in targets):
        staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
        for name, target in targets.items():
            (staging / name).symlink_to(target, target_is_directory=True)
        try:
            staging.rename(folder)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    return str(folder)


def worker_env() -> dict[str, str]:
    """What a second interpreter's worker adds to its environment: `module_path()` as its whole module path, no
    user site-packages, and PyPy's nursery at `PYPY_NURSERY` unless the user set `PYPY_GC_NURSERY`."""
    env = {"PYTHONPATH": module_path(), "PYTHONNOUSERSITE": "1"}
    if "PYPY_GC_NURSERY" not in os.environ:
        env["PYPY_GC_NURSERY"] = PYPY_NURSERY
    return env


@dataclass(frozen=True)
class Answer:
    """One translation: the translator worker's answer (`translate.translate_message`) and who wrote it."""

    value: dict[str, Any]
    translator: str  # "cpython" or the second interpreter's name ("pypy3")


class Translators(Resource):
    """The CPython translator worker, and a PyPy one raced against it where `python` is given."""

    def __init__(self, python: str | None = None, pypy_after_s: float = PYPY_AFTER_S) -> None:
        self.python = python
        self.pypy_after_s = pypy_after_s
        self.name = "cpython" if python is None else os.path.basename(python)
        self.primary = WorkerProcess(preload=PRELOAD)
        self.second: WorkerProcess | None = None
        self._second_lock = threading.Lock()
        self._warming: threading.Thread | None = None

    def _second(self) -> WorkerProcess | None:
        """The PyPy worker, started on first use; None where there is none (or it was given up on)."""
        with self._second_lock:
            if self.second is None and self.python is not None:
                env = worker_env()
                self.second = WorkerProcess(
                    preload=PRELOAD, python=self.python, env=env, abort_grace_s=PYPY_ABORT_GRACE_S
                )
            return self.second

    def translate(self, deadline: float, **kwargs: Any) -> Answer:
        """Translate with both workers (the second `pypy_after_s` after the first); the first answer wins and the
        other worker is stopped. Raises as `WorkerProcess.call` does: BudgetExpired when neither answered."""
        if self.python is None:
            return Answer(self.primary.call(TRANSLATE_OP, deadline, **kwargs), "cpython")
        outer = cancel.current()
        signals = {"cpython": cancel.StopSignal(outer), self.name: cancel.StopSignal(outer)}
        answers: queue.SimpleQueue[tuple[str, Any, BaseException | None]] = queue.SimpleQueue()

        def run(label: str, delay: float) -> None:
            with cancel.scope(signals[label]):
                try:
                    if delay > 0 and cancel.sleep_until(min(deadline, time.monotonic() + delay)):
                        raise BudgetExpired()
                    worker = self.primary if label == "cpython" else self._second()
                    if worker is None:
                        raise BudgetExpired()
                    if worker is not self.primary and worker.answered == 0:
                        self._check_starts(worker, deadline)
                    answers.put((label, worker.call(TRANSLATE_OP, deadline, **kwargs), None))
                except BaseException as error:  # handed to the caller's thread
                    answers.put((label, None, error))

        threads = [
            threading.Thread(target=run, args=("cpython", 0.0), daemon=True),
            threading.Thread(target=run, args=(self.name, self._delay()), daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            return self._first(answers)
        finally:
            for signal in signals.values():
                signal.set("the other translator answered")
            for thread in threads:
                thread.join()
            for signal in signals.values():
                signal.close()

    def warm_up(self) -> None:
        """Start the second worker now and have it translate the `WARM_UP` bundled tasks on a thread of its own,
        so its JIT is warm before the first large task (a task arriving meanwhile starts on CPython, as ever; the
        second worker joins once the warm-up is done)."""
        second = self._second()
        if second is None:
            return
        from domains.bundled import bundled_task

        tasks = [bundled_task(domain, size, seed=0) for domain, size in WARM_UP]

        def run() -> None:
            try:
                for task in tasks:
                    deadline = time.monotonic() + 30
                    second.call(TRANSLATE_OP, deadline, domain_pddl=task.domain_pddl, problem_pddl=task.problem_pddl)
            except Exception:  # a warm-up is an optimisation: a failure shows on the first real call
                log.debug("translator warm-up failed", exc_info=True)

        self._warming = threading.Thread(target=run, name="translator-warm-up", daemon=True)
        self._warming.start()

    def wait_warm(self, timeout_s: float = 30.0) -> None:
        """Return once the second worker's warm-up (if one was started) has ended."""
        if self._warming is not None:
            self._warming.join(timeout_s)

    def _delay(self) -> float:
        """How long after CPython the second interpreter starts: `pypy_after_s`, from when CPython's worker can
        start translating (a worker that never answered yet may still be importing)."""
        return self.pypy_after_s + (COLD_START_S if self.primary.answered == 0 and self.pypy_after_s > 0 else 0.0)

    def _first(self, answers: queue.SimpleQueue[tuple[str, Any, BaseException | None]]) -> Answer:
        errors: dict[str, BaseException] = {}
        while len(errors) < 2:
            label, value, error = answers.get()
            if error is None:
                return Answer(value, label)
            errors[label] = error
            log.info("the %s translator gave no translation: %s", label, type(error).__name__)
            if label == "cpython" and isinstance(error, WorkerError):
                raise error  # the reference translator refused the task (a parse error, memory): that is the answer
        raise errors["cpython"]  # neither answered: CPython's reason (the deadline, a crash, memory)

    def _check_starts(self, second: WorkerProcess, deadline: float) -> None:
        """Before its first task, the second worker answers a ping: one that dies instead cannot run here (an
        import, too old a PyPy) and is given up for good. A worker that answered once and dies later died of its
        task (its memory cap, say), which says nothing about the next."""
        try:
            second.call("ping", deadline)
        except WorkerCrashed:
            with self._second_lock:
                if self.second is second:
                    log.warning("the %s translator worker died before it ever answered; using CPython only", self.name)
                    self.python, self.second = None, None
                    second.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [pid for worker in (self.primary, self.second) if worker is not None and (pid := worker.pid)]

    def close(self) -> None:
        for worker in (self.primary, self.second):
            if worker is not None:
                worker.close()
