"""Two translator workers, CPython and PyPy, raced: small tasks answered by CPython, large ones by a warm PyPy.

Fast Downward's translator is pure Python. A warm PyPy translates large tasks several times faster than CPython
but small ones more slowly, and which kind a task is shows only once it has been translating for a while; so
both run (why this race, with these delays: `docs/decisions/pypy-translator.md`).

`Translators(python=None, pypy_after_s=PYPY_AFTER_S)`; `translate(deadline, domain_pddl=..., problem_pddl=...,
options=...)` -> `Answer` (the translator worker's answer, `translate.translate_message`, and which interpreter
wrote it: `Answer.translator`, recorded as `Translation.translator` and the attempt's `details["translator"]`).
It raises as `WorkerProcess.call` does (`BudgetExpired` when neither answered by `deadline`).

- The CPython worker starts on every task at once.
- A PyPy worker, where `python` names one, starts on the same task `pypy_after_s` later (counted from when
  CPython's worker can start translating: one that never answered may still be importing), and the first answer
  wins; the other is stopped (`portfolio.engine.cancel`).
- The PyPy worker is started the first time a task needs it (or by `warm_up()`, which has it translate the
  `WARM_UP` bundled tasks on a thread of its own), so small tasks never pay its start-up; it is stopped by a
  signal, not killed (`portfolio.engine.workers`), so its JIT stays warm across deadlines and races lost.
- CPython's answer is the reference: a PyPy answer that is an error (a recursion limit, memory) is set aside and
  CPython's awaited; a PyPy worker that dies before it ever answered (a translator it cannot import, too old a
  PyPy) is given up on for this process, with a warning.

The SAS text is the same whichever interpreter wrote it (`benchmarks/experiments/sas_compare.py --python`).

`find_python(configured)`: `translator_python=` (`--translator-python`), else `PORTFOLIO_TRANSLATOR_PYTHON`, else
`pypy3` on the PATH; "off" (or "none", "cpython") turns the second worker off. PyPy gets a folder of its own on
its module path (`module_path`) holding links to the `portfolio` package and this environment's translator
package, so it imports them and nothing else of this environment's site-packages (compiled for CPython).

    translators = Translators(find_python(None))
    answer = translators.translate(time.monotonic() + 1.0, domain_pddl=domain, problem_pddl=problem)
    sas_text = answer.value["sas"]"""

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
# PyPy starts this late: it leaves CPython the mid-size tasks PyPy cannot win (docs/decisions/pypy-translator.md).
PYPY_AFTER_S = 0.2
# The warm-up: four bundled domains, enough to warm PyPy's JIT before the first large task; more gains little
# (docs/decisions/pypy-translator.md).
WARM_UP = (("logistics", 20), ("tools", 3), ("blocksworld", 12), ("gripper", 20))
COLD_START_S = 0.1  # a CPython translator worker's start to its first answer (its imports)
# PyPy sizes its young generation at half the CPU's last-level cache, so the same PyPy is another program on
# another machine; a fixed 4 MB (PyPy's own fallback where it cannot read the cache size) starts under the
# service's caps and translates near the fastest (docs/decisions/pypy-translator.md).
PYPY_NURSERY = "4MB"
PYPY_ABORT_GRACE_S = 0.5  # PyPy answers an abort at once; past this it is killed


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
