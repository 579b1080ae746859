"""Counters are exported once: an agent counts in its own `Counters` and in the process-wide ones, and only the
process-wide ones write to the OpenTelemetry instruments (checked with the real SDK's in-memory reader)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from domains.typed_actions import action
from portfolio.agent import Agent


@dataclass
class Question:
    text: str


@dataclass
class Answer:
    text: str


@dataclass
class Draft:
    text: str


@action(cost=1.0)
def look_up(question: Question) -> Answer:
    return Answer(question.text.upper())


@action(cost=1.0)
def flaky_look_up(question: Question) -> Answer:
    raise TimeoutError("index down")


@action(goal=True)
def write(answer: Answer) -> Draft:
    return Draft(answer.text)


@pytest.fixture(scope="module")
def reader():
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    if not isinstance(metrics.get_meter_provider(), MeterProvider):  # pragma: no cover - set elsewhere first
        pytest.skip("another test set the global meter provider")
    return reader


def exported(reader) -> dict[tuple[str, str], int]:
    """(instrument, attribute value) -> cumulative count, from the reader."""
    totals: dict[tuple[str, str], int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name.startswith("portfolio."):
                    for point in metric.data.data_points:
                        key = (metric.name, next(iter(point.attributes.values()), ""))
                        totals[key] = totals.get(key, 0) + point.value
    return totals


def test_each_step_and_replan_is_exported_once(reader):
    before = exported(reader)
    with Agent([flaky_look_up, look_up, write], warm=False) as agent:
        assert agent.run(Question("why")).succeeded
        own = agent.counters.snapshot()
    after = exported(reader)
    delta = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}
    expected = {("portfolio.steps", outcome): n for outcome, n in own["steps"].items()}
    expected |= {("portfolio.replans", trigger): n for trigger, n in own["replans"].items()}
    assert own["steps"].get("failure", 0) >= 1 and own["replans"]
    assert delta == expected
