"""The Fast Downward delegate's translations: kept in memory, on disk, and made once however many threads ask.

A translation depends on the task's structure (domain, objects, goal, numeric facts: `structure_key`) and the
translator options, not on the initial state: a task met again from another state (a replan) reuses it, with
the SAS initial values rewritten (`SasTask.with_init`). The newest `cache_size` live in memory; with a
`SasCache` they also survive the process (a task translated by any process before is read from disk: the
attempt's `details["translation"]` says "disk"). The cascade may carry the delegate's work over past its share
(`portfolio.engine.cascade`), so two threads can ask for the same task at once: the second waits for the first's
translation instead of making its own, and the wait ends with the deadline or the thread's stop signal
(`portfolio.engine.cancel`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from domains.model import Atom, Task
from portfolio.delegates.fast_downward.sas import SasTask, parse_sas
from portfolio.delegates.fast_downward.sas_cache import CachedTranslation, SasCache, cache_key
from portfolio.delegates.fast_downward.translate import TRANSLATE_OP
from portfolio.engine import cancel
from portfolio.engine.results import PlanRequest
from portfolio.engine.workers import BudgetExpired, WorkerProcess

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Translation:
    init: frozenset[Atom]  # the initial state this translation was made from
    sas: SasTask | None  # None when the translator proved the task unsolvable
    translate_ms: float
    source: str = "translated"  # for this call: "translated", "memory" (this process) or "disk" (SasCache)
    options: tuple[str, ...] = ()  # the translator options it was made with (none: the driver's defaults)


def structure_key(task: Task) -> tuple:
    """What a translation depends on besides the initial state."""
    problem = task.problem
    return (task.domain_pddl or task.domain, problem.objects, problem.numeric_init, problem.goal)


class Translations:
    """The translations of one delegate: `get` answers from memory, then disk, then the translator worker
    (`translator()`, called when a translation is needed). `translations` counts the translator's runs, so what
    the caches save is visible."""

    def __init__(
        self, translator: Callable[[], WorkerProcess], cache_size: int = 64, disk_cache: SasCache | None = None
    ) -> None:
        self._translator = translator
        self.cache_size = cache_size
        self.disk_cache = disk_cache
        self._translations: OrderedDict[tuple, Translation] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._pending: dict[tuple, threading.Event] = {}  # translations under way, so two threads make one
        self.translations = 0

    def clear(self) -> None:
        """Forget the translations kept in memory (the disk cache stays)."""
        with self._cache_lock:
            self._translations.clear()

    def keys(self) -> list[tuple]:
        """The (task structure, translator options) of each translation in memory, oldest first."""
        with self._cache_lock:
            return list(self._translations)

    def get(
        self, request: PlanRequest, deadline: float, options: tuple[str, ...] = ()
    ) -> tuple[Translation, tuple[int, ...] | None]:
        """The cached translation for the request's task (made with translator `options`) and, when it was made
        from another initial state, the SAS initial values for the request's state. Translates (under the
        deadline) when nothing cached fits."""
        key = (structure_key(request.task), options)
        init = request.initial_state
        while True:
            found = self._cached(key, init)
            if found is not None:
                return found
            with self._cache_lock:
                other = self._pending.get(key)
                if other is None:
                    running = self._pending[key] = threading.Event()
            if other is None:
                break
            # Another thread (work carried over from the classical tier) is translating this task: wait for its
            # translation instead of making a second one, then look again (if it failed, translate here).
            while not other.wait(max(0.0, min(0.05, deadline - time.monotonic()))):
                if cancel.expired(deadline):
                    raise BudgetExpired()
        try:
            return self._translate(key, request, deadline, options), None
        finally:
            with self._cache_lock:
                self._pending.pop(key, None)
            running.set()

    def _cached(self, key: tuple, init: frozenset[Atom]) -> tuple[Translation, tuple[int, ...] | None] | None:
        with self._cache_lock:
            cached = self._translations.get(key)
            if cached is not None:
                self._translations.move_to_end(key)
        if cached is not None and cached.sas is not None:
            if cached.init == init:
                return replace(cached, source="memory"), None
            values = cached.sas.with_init(cached.init, init)
            if values is not None:
                return replace(cached, source="memory"), values
        return None

    def _translate(self, key: tuple, request: PlanRequest, deadline: float, options: tuple[str, ...]) -> Translation:
        init = request.initial_state
        task = request.effective_task()
        start = time.monotonic()
        disk_key = "" if self.disk_cache is None else cache_key(task.domain_pddl, task.problem_pddl, options=options)
        translation = self._from_disk(disk_key, init, start, options)
        if translation is None:
            self.translations += 1
            answer = self._translator().call(
                TRANSLATE_OP, deadline, domain_pddl=task.domain_pddl, problem_pddl=task.problem_pddl, options=options
            )
            translation = Translation(
                init=init,
                sas=None if answer["unsolvable"] else parse_sas(answer["sas"]),
                translate_ms=(time.monotonic() - start) * 1000,
                options=options,
            )
            log.info("translated in %.0f ms", translation.translate_ms)
            if self.disk_cache is not None:
                self.disk_cache.put(disk_key, CachedTranslation(answer["sas"], bool(answer["unsolvable"])))
        with self._cache_lock:
            self._translations[key] = translation
            while len(self._translations) > self.cache_size:
                self._translations.popitem(last=False)
        return translation

    def _from_disk(self, key: str, init: frozenset[Atom], start: float, options: tuple[str, ...]) -> Translation | None:
        """The translation stored under `key` in the disk cache, or None (no cache, a miss, or an entry that
        does not parse: that one is removed, so the fresh translation rewrites it)."""
        if self.disk_cache is None:
            return None
        entry = self.disk_cache.get(key)
        if entry is None:
            return None
        try:
            sas = None if entry.unsolvable else parse_sas(entry.sas)
        except (ValueError, IndexError) as error:
            log.warning("translation cache entry %s does not parse (%s): translating again", key, error)
            self.disk_cache.corrupt += 1
            self.disk_cache.path(key).unlink(missing_ok=True)
            return None
        return Translation(
            init=init, sas=sas, translate_ms=(time.monotonic() - start) * 1000, source="disk", options=options
        )
