"""Quotas per principal: requests per second and request-body bytes per second (token buckets), plans at once,
and retrains started per minute. Beyond one, the request is answered 429 with Retry-After (`QuotaExceeded`).

A key's own quotas (`portfolio keys add --rps ... --max-concurrent-plans ... --body-mb-per-s ...`) win over the
server's (`QuotaDefaults`, `portfolio serve`'s options of the same names). The buckets live in the server's
memory: a restart refills them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel, ConfigDict, Field

from portfolio.serve.keys import Principal


class QuotaExceeded(Exception):
    """Over a quota: answered 429 with `Retry-After: retry_after` (whole seconds, at least 1)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))
        self.kind = "QuotaExceeded"


class QuotaDefaults(BaseModel):
    """The server's quotas per principal, for keys that set none of their own."""

    model_config = ConfigDict(extra="forbid")

    rps: float = Field(default=100.0, gt=0, allow_inf_nan=False, description="requests per second (burst: 1 s)")
    max_concurrent_plans: int = Field(default=8, ge=1, description="plans and replans in flight at once")
    body_mb_per_s: float = Field(default=64.0, gt=0, allow_inf_nan=False, description="request-body MB per second")
    retrains_per_minute: float = Field(default=6.0, gt=0, allow_inf_nan=False, description="retrains started")


class Bucket:
    """A token bucket: `rate` tokens a second, holding at most `capacity`. `take(n)` spends n if the bucket
    holds them and says how long until it would; `charge(n)` spends n regardless (a debt later takes repay)."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity = rate, capacity
        self.tokens = capacity
        self.stamp = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, n: float = 1.0) -> float | None:
        """None when spent; else the seconds until `n` tokens are there (nothing spent)."""
        self._refill()
        n = min(n, self.capacity)
        if self.tokens >= n:
            self.tokens -= n
            return None
        return (n - self.tokens) / self.rate

    def charge(self, n: float) -> None:
        self._refill()
        self.tokens -= n


class Quotas:
    """Every principal's buckets and plans in flight. Called on the event loop only (no lock needed)."""

    def __init__(self, defaults: QuotaDefaults | None = None, max_body_bytes: int = 32 * 1024 * 1024) -> None:
        self.defaults = defaults or QuotaDefaults()
        self.max_body_bytes = max_body_bytes
        self._buckets: dict[tuple[str, str, float], Bucket] = {}
        self._plans: dict[str, int] = {}

    def _bucket(self, kind: str, principal: Principal, rate: float, capacity: float) -> Bucket:
        key = (kind, principal.name, rate)  # a key revoked and added again with another rate: a new bucket
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(rate, capacity)
        return bucket

    def admit(self, principal: Principal, body_bytes: int) -> None:
        """Count one request of `principal` with a body of `body_bytes` (its Content-Length, 0 without one);
        QuotaExceeded when over the request rate or the body-byte rate."""
        rps = principal.rps or self.defaults.rps
        wait = self._bucket("requests", principal, rps, max(1.0, rps)).take()
        if wait is not None:
            raise QuotaExceeded(f"over {rps:g} requests per second for {principal.name!r}: retry in {wait:.2f} s", wait)
        if body_bytes:
            self.charge_body(principal, body_bytes, check=True)

    def charge_body(self, principal: Principal, body_bytes: int, check: bool = False) -> None:
        """Count `body_bytes` of request body; with `check`, QuotaExceeded when the bucket does not hold them
        (a body without Content-Length is counted after it is read, without the check)."""
        rate = (principal.body_mb_per_s or self.defaults.body_mb_per_s) * 1024 * 1024
        # any one body the server accepts fits a full bucket
        bucket = self._bucket("bytes", principal, rate, max(rate, float(self.max_body_bytes)))
        if not check:
            bucket.charge(body_bytes)
            return
        wait = bucket.take(body_bytes)
        if wait is not None:
            raise QuotaExceeded(
                f"over {rate / 2**20:g} MB of request bodies per second for {principal.name!r}: retry in {wait:.2f} s",
                wait,
            )

    def retrain(self, principal: Principal) -> None:
        """Count one retrain started by `principal` (joining a running one is free); QuotaExceeded beyond."""
        rate = self.defaults.retrains_per_minute / 60.0
        wait = self._bucket("retrains", principal, rate, max(1.0, self.defaults.retrains_per_minute)).take()
        if wait is not None:
            raise QuotaExceeded(
                f"over {self.defaults.retrains_per_minute:g} retrains per minute for {principal.name!r}: "
                f"retry in {wait:.0f} s",
                wait,
            )

    def plan_limit(self, principal: Principal) -> int:
        return principal.max_concurrent_plans or self.defaults.max_concurrent_plans

    def acquire_plan(self, principal: Principal) -> None:
        """Take one of `principal`'s plan slots; QuotaExceeded when they are all in use."""
        limit = self.plan_limit(principal)
        if self._plans.get(principal.name, 0) >= limit:
            raise QuotaExceeded(f"{principal.name!r} has {limit} plans in flight already (its limit): retry shortly", 1)
        self._plans[principal.name] = self._plans.get(principal.name, 0) + 1

    def release_plan(self, principal: Principal) -> None:
        left = self._plans.get(principal.name, 0) - 1
        if left > 0:
            self._plans[principal.name] = left
        else:
            self._plans.pop(principal.name, None)

    @contextmanager
    def plan_slot(self, principal: Principal) -> Iterator[None]:
        self.acquire_plan(principal)
        try:
            yield
        finally:
            self.release_plan(principal)
