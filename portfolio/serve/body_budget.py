"""How much of the server's own memory large request bodies may take at once (`BodyBudget`), and what one costs.

The server holds a body several times over while it reads, screens, decodes and hands it on; how many times
depends on the route, and was measured with psutil (`python -m benchmarks.experiments.body_memory`: the peak
resident memory of `portfolio serve` less what it held before, per body byte, one 23 MB body on a fresh server):
a /v1/steps batch 19.1x (the decoded JSON, then a pydantic record per step, then the rows SQLite is given; 26.2x
before the decoded steps were let go of as they became records), a /v1/plan body 12.0x, a /v1/validate body
8.0x. The Guard's admission had assumed 6.5x for every body: four 23 MB step batches were let in at once under
--memory-limit 1024 and the server peaked at 2,286 MB.

So a large body is charged its route's cost (`MEMORY_PER_BODY_BYTE`, rounded up from those figures) against a
budget: the --memory-limit less what the server holds besides (`SERVER_BASE_MB`). A body that would not fit the
budget even alone is refused with 413, naming the largest that would; one that would not fit beside those in
flight is refused with 503 and Retry-After, before it is read.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1024 * 1024
# Server memory per body byte while the request runs, by route (measured above, rounded up); other routes: DEFAULT
MEMORY_PER_BODY_BYTE = {"/v1/steps": 20, "/v1/validate": 9}
DEFAULT_MEMORY_PER_BODY_BYTE = 12
# What the server's own process holds besides large bodies: ~125 MB resident at rest with two workers (measured),
# with room for small requests, MCP sessions and SQLite's page cache.
SERVER_BASE_MB = 256
MIN_BUDGET_MB = 64  # a --memory-limit under the base still lets bodies of a few MB in


def cost(path: str, size: int) -> int:
    """The server memory (bytes) a body of `size` bytes sent to `path` takes while its request runs."""
    return size * MEMORY_PER_BODY_BYTE.get(path, DEFAULT_MEMORY_PER_BODY_BYTE)


@dataclass(frozen=True)
class Refusal:
    status: int  # 413: too large for the budget at all; 503: not beside those in flight (retry)
    message: str
    kind: str


class BodyBudget:
    """The large bodies in flight, charged `cost` each, within `budget` bytes (default: the --memory-limit
    `memory_limit_mb` less `SERVER_BASE_MB`). Called on the event loop only."""

    def __init__(self, memory_limit_mb: int, budget: int | None = None) -> None:
        self.memory_limit_mb = memory_limit_mb
        self.budget = budget or max(MIN_BUDGET_MB, memory_limit_mb - SERVER_BASE_MB) * MB
        self.in_flight = 0

    def largest(self, path: str) -> int:
        """The largest body (bytes) `path` takes within the whole budget."""
        return self.budget // cost(path, 1)

    def take(self, path: str, size: int) -> Refusal | None:
        """Charge a body of `size` bytes to `path` (None), or say why not (nothing charged); `give_back` the same
        `path` and `size` when its request ends."""
        needed = cost(path, size)
        where = (
            f"the {self.budget // MB} MB this server keeps for request bodies (--memory-limit {self.memory_limit_mb})"
        )
        if needed > self.budget:
            return Refusal(
                413,
                f"a {size / MB:.0f} MB body to {path} would take about {needed // MB} MB of the server's memory, "
                f"over {where}: send at most {self.largest(path) / MB:.0f} MB (for steps, smaller batches)",
                "BodyTooLarge",
            )
        if self.in_flight + needed > self.budget:
            return Refusal(
                503,
                f"the server is busy with large request bodies ({self.in_flight // MB} MB of {where}); retry shortly",
                "BusyWithLargeBodies",
            )
        self.in_flight += needed
        return None

    def give_back(self, path: str, size: int) -> None:
        self.in_flight -= cost(path, size)
