"""Tier and Stage: what the cascade's stages are, and how a tier splits its budget between its delegates.

A `Tier` is delegates that share one budget, tried in order within it. Time is split by shares, as Fast
Downward's portfolios weight their members: a delegate gets `remaining tier time x its share / the shares of the
delegates still to run` (`share_deadline`), so a slow first delegate cannot starve the later ones, and time a
delegate leaves unused goes to the ones after it (the last one gets all that is left). Delegates that decline the
task hold no share.

Its own file because it is the cascade's vocabulary, not its control flow: what a stage is and how a budget is
divided are read (and built, by `portfolio.delegates.registry`) without the carry-over machinery of
`portfolio.engine.cascade`, which runs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from portfolio.engine.results import Delegate, Resource


@dataclass
class Tier(Resource):
    """Delegates that share one budget, tried in order within it; `shares` (one weight per delegate) split the
    budget as the module docstring says. Without them each delegate's own `share` counts (`Delegate.share`:
    Fast Downward 4, the LLM 2, others 1)."""

    name: str
    delegates: list[Delegate]
    budget_s: float
    shares: Sequence[float] | None = None

    def __post_init__(self) -> None:
        _check_delegates(self.delegates, f"tier {self.name}")
        # An infinite budget overflowed select()'s timeout inside the delegates; zero, negative and nan ones
        # quietly left the tier no time at all.
        if not (math.isfinite(self.budget_s) and self.budget_s > 0):
            raise ValueError(
                f"tier {self.name}: budget_s: expected a finite number of seconds > 0, got {self.budget_s}"
            )
        if self.shares is not None:
            if len(self.shares) != len(self.delegates):
                raise ValueError(f"tier {self.name}: {len(self.shares)} shares for {len(self.delegates)} delegates")
            if not all(math.isfinite(share) and share > 0 for share in self.shares):  # inf: NaN slices
                raise ValueError(f"tier {self.name}: shares must be finite and positive, got {list(self.shares)}")

    def share_of(self, index: int) -> float:
        if self.shares is not None:
            return float(self.shares[index])
        return float(self.delegates[index].share)

    def close(self) -> None:
        for delegate in self.delegates:
            delegate.close()


Stage = Tier | Delegate


def _check_delegates(delegates: Sequence[object], where: str) -> None:
    """A TypeError naming the first stage that is not a `Delegate` (the base class holds the defaults the cascade
    relies on: `supports`, `share`, `carries_over`, `source`)."""
    for delegate in delegates:
        if not isinstance(delegate, Delegate):
            raise TypeError(
                f"{where}: {delegate!r} is not a Delegate; subclass portfolio.engine.results.Delegate "
                "and implement solve(request, deadline)"
            )


def share_deadline(now: float, tier_deadline: float, share: float, shares_left: float) -> float:
    """When a delegate's slice of its tier ends: the remaining time x share / shares still to run."""
    remaining = max(0.0, tier_deadline - now)
    return now + remaining * (share / shares_left if shares_left > 0 else 1.0)
