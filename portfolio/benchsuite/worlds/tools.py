"""The hidden truth of the `tools` world: report jobs of the bundled `tools` domain whose grounded actions fail
with probabilities that depend on the situation (`{"hour": "peak" | "off-peak", "region": "eu" | "us"}`).

`WORLD_RULES`: the cheap web engine fails 80% of the time at peak hours and 4% off-peak; connecting to
db-internal fails 75% from the EU; querying db-news fails 30% always; the small writer 4%; everything else 1%.
It is the world the failure model was tuned on first, and one type of the generated family (`family.py`).

`AGENT_TOOLS_RULES` (the `agent-tools` type, docs/traces.md's walkthrough): the cheap engine web-basic
fails 80% of the time whatever the situation, while the dearer web-pro works (1%); database queries time out 60%
of the time, everything else fails 1%. So under the true costs (lam = 5) web-pro is the cheapest route for every
job: a query's risk alone (5 * -log 0.4 = 4.6) outweighs web-pro's extra cost, even with the connection shared
by several jobs (at 25% the shared connection made the database the oracle's choice for 2-3 jobs, at a 44%
chance of failing: the oracle's cost, not its success, is what the arms are compared against).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from domains.model import GroundAction


@dataclass(frozen=True)
class FailureRule:
    """Grounded actions named `action` (and having `uses` among their arguments, when given) fail with
    probability `p_when` in situations where `when` holds (a (key, value) pair, or always when None), else with
    `p_else`."""

    action: str
    uses: str | None
    when: tuple[str, str] | None
    p_when: float
    p_else: float

    def matches(self, step: GroundAction) -> bool:
        return step.name == self.action and (self.uses is None or self.uses in step.args)

    def p_fail(self, context: Mapping[str, str]) -> float:
        if self.when is None or context.get(self.when[0]) == self.when[1]:
            return self.p_when
        return self.p_else


WORLD_RULES: tuple[FailureRule, ...] = (
    FailureRule("web-search", "web-basic", ("hour", "peak"), 0.80, 0.04),  # rate-limited at peak hours
    FailureRule("connect-database", "db-internal", ("region", "eu"), 0.75, 0.03),  # VPN only from the US
    FailureRule("query-database", "db-news", None, 0.30, 0.30),  # times out, whatever the situation
    FailureRule("write-report", "writer-small", None, 0.04, 0.04),
)
AGENT_TOOLS_RULES: tuple[FailureRule, ...] = (
    FailureRule("web-search", "web-basic", None, 0.80, 0.80),
    FailureRule("query-database", None, None, 0.60, 0.60),
)
# Unavoidable failures are kept small so that plan choice decides the outcome: a 10-step plan of default
# actions still succeeds 90% of the time.
DEFAULT_P_FAIL = 0.01


def true_p_fail(step: GroundAction, context: Mapping[str, str], rules: Sequence[FailureRule] = WORLD_RULES) -> float:
    """The hidden probability that `step` fails in `context`: the first matching rule's, else DEFAULT_P_FAIL."""
    for rule in rules:
        if rule.matches(step):
            return rule.p_fail(context)
    return DEFAULT_P_FAIL


def plan_success_probability(plan: Sequence[GroundAction], context: Mapping[str, str]) -> float:
    """The true probability that every step of `plan` succeeds (steps fail independently)."""
    return math.prod(1.0 - true_p_fail(step, context) for step in plan)
