"""Prometheus metrics for the service (`GET /metrics`, prometheus-client's text format).

One registry per service (not the library's global one), so two services in one process, as in the tests, do
not collide. Routes are labelled by their template (`/v1/jobs/{id}`), never the raw path, to keep the label set
bounded.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

from traces.attempt_details import details_of

disable_created_metrics()  # the *_created series double the output and no dashboard reads them

ROUTES = (
    "/v1/plan",
    "/v1/replan",
    "/v1/steps",
    "/v1/health",
    "/v1/actions",
    "/v1/retrain",
    "/v1/validate",
    "/metrics",
    "/openapi.json",
    "/docs",
)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def route_label(path: str) -> str:
    if path in ROUTES:
        return path
    if path.startswith("/v1/jobs/"):
        return "/v1/jobs/{id}"
    if path.startswith("/docs/assets/"):
        return "/docs/assets"
    if path == "/mcp" or path.startswith("/mcp/"):
        return "/mcp"
    return "other"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "portfolio_requests", "HTTP requests by route and status", ["route", "status"], registry=self.registry
        )
        self.plan_latency = Histogram(
            "portfolio_plan_seconds",
            "Planning time by deciding delegate and outcome",
            ["delegate", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.fallthroughs = Counter(
            "portfolio_cascade_fallthroughs",
            "Attempts that handed over to the next delegate, by delegate and status",
            ["delegate", "status"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "portfolio_queue_depth", "Requests waiting for a free planner worker", registry=self.registry
        )
        self.busy_workers = Gauge("portfolio_busy_workers", "Planner workers running a request", registry=self.registry)
        self.worker_restarts = Counter(
            "portfolio_worker_restarts", "Planner workers replaced, by reason", ["reason"], registry=self.registry
        )
        self.steps_recorded = Counter(
            "portfolio_steps_recorded", "Executed steps recorded in the trace store", registry=self.registry
        )
        self.held_steps = Counter(
            "portfolio_steps_held",
            "Steps the poison guard held back from a retrain's fit (`learning.guard`; held again, counted again)",
            registry=self.registry,
        )
        self.store_write_failures = Counter(
            "portfolio_store_write_failures",
            "Trace-store writes that failed while the call went on (a plan answered unrecorded), by error",
            ["kind"],
            registry=self.registry,
        )

    def observe_plan(self, result: dict[str, Any]) -> None:
        """Record one PlanResult (as JSON): its latency and the attempts that fell through."""
        settled = result.get("status") in ("solved", "unsolvable")
        for attempt in result.get("attempts") or []:
            if settled and (attempt["delegate"], attempt["status"]) == (result.get("delegate"), result["status"]):
                continue  # the attempt that decided the call
            # With carry-over (`portfolio.engine.cascade`) a delegate's background record and a delegate stopped by the
            # other side's answer handed nothing over: the hand-over was counted at the end of the share.
            details = details_of(attempt)
            if not details.get("background") and not details.get("stopped_by"):
                self.fallthroughs.labels(attempt["delegate"], attempt["status"]).inc()
        delegate = result.get("delegate") or "none"
        self.plan_latency.labels(delegate, result.get("status", "error")).observe(
            float(result.get("elapsed_ms") or 0.0) / 1000.0
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
