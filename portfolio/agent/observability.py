"""Structured events, optional OpenTelemetry spans and in-process counters for the execution loop.

Every plan, replan and step is one `logging` record on the `portfolio.events` logger: the message is
`event key=value ...` for people, and `record.event` / `record.fields` carry the same data for log handlers
that ship JSON. When `opentelemetry-api` is importable, `span()` opens a real span (plan, replan with its
reason, step) on the globally configured tracer and counters are mirrored to OpenTelemetry metrics; without it
both are no-ops, so the loop never depends on it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from types import ModuleType
from typing import Any

log = logging.getLogger("portfolio.events")

_otel_metrics: ModuleType | None
_otel_trace: ModuleType | None
try:  # optional dependency
    from opentelemetry import metrics as _otel_metrics
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - depends on the environment
    _otel_trace = None
    _otel_metrics = None

OTEL = _otel_trace is not None


def _value(value: Any) -> str:
    text = str(value)
    return repr(text) if (" " in text or not text) else text


def emit(event: str, **fields: Any) -> None:
    """Log one structured event, e.g. `emit("step", action="(find-person)", outcome="success", ms=1.2)`."""
    if log.isEnabledFor(logging.INFO):
        message = event + "".join(f" {k}={_value(v)}" for k, v in fields.items() if v is not None)
        log.info(message, extra={"event": event, "fields": fields})


def _attribute(value: Any) -> Any:
    return value if isinstance(value, (str, bool, int, float)) else str(value)


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """An OpenTelemetry span named `portfolio.<name>` when the API is installed, else nothing. Yields the span
    (or None) so callers can add attributes once they know them."""
    if _otel_trace is None:
        yield None
        return
    tracer = _otel_trace.get_tracer("portfolio-planner")
    with tracer.start_as_current_span(
        f"portfolio.{name}", attributes={k: _attribute(v) for k, v in attributes.items() if v is not None}
    ) as current:
        yield current


def set_attributes(current: Any, **attributes: Any) -> None:
    if current is not None:
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(key, _attribute(value))


class Counters:
    """Replans by reason (trigger) and steps by outcome, thread-safe.

    `export=True` mirrors them to the OpenTelemetry instruments `portfolio.replans` / `portfolio.steps`. Only
    the process-wide `COUNTERS` does: every event is counted there and in its agent's own `Counters`, and if
    both wrote to the same instruments every event would be exported twice.
    """

    def __init__(self, export: bool = False) -> None:
        self._lock = threading.Lock()
        self.replans: Counter[str] = Counter()
        self.steps: Counter[str] = Counter()
        self._otel = None
        if export and _otel_metrics is not None:
            meter = _otel_metrics.get_meter("portfolio-planner")
            self._otel = (
                meter.create_counter("portfolio.replans", description="replans by trigger"),
                meter.create_counter("portfolio.steps", description="executed steps by outcome"),
            )

    def replan(self, trigger: str) -> None:
        with self._lock:
            self.replans[trigger] += 1
        if self._otel is not None:
            self._otel[0].add(1, {"trigger": trigger})

    def step(self, outcome: str) -> None:
        with self._lock:
            self.steps[outcome] += 1
        if self._otel is not None:
            self._otel[1].add(1, {"outcome": outcome})

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {"replans": dict(self.replans), "steps": dict(self.steps)}


COUNTERS = Counters(export=True)  # process-wide totals, exported; every agent also keeps its own


__all__ = ["COUNTERS", "OTEL", "Counters", "emit", "set_attributes", "span"]
