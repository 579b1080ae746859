"""The learning evaluation's data: the names it runs and reports by, and the records it hands from the harness
(`learning_eval.evaluate`) and the latency measurement (`learning_latency`) to the report (`learning_report`).

They sit at the bottom of the harness's imports: `learning_eval` uses the other four, `learning_episodes`,
`learning_latency` and `learning_report` use this module only, so the harness imports its report without an
import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
ARMS = ("cost-blind", "learned", "oracle")
DOMAIN = "tools"
LATENCY_TASK = (3, 0)  # (size, seed) of the task warm latency is measured on
TARGET_SUCCESS_VS_ORACLE = 0.95
TARGET_FAILURES_VS_BLIND = 0.5
TARGET_LATENCY_OVERHEAD = 0.10


@dataclass
class Outcome:
    """One arm's episode."""

    arm: str
    episode: int
    size: int
    task_seed: int
    context: dict[str, str]
    solved: bool
    plan: list[str]
    base_cost: float
    expected_success: float
    success: bool
    steps_executed: int
    failed_step: str | None
    plan_ms: float
    predicted_success: float | None = None  # the learned arm's own estimate


@dataclass
class Latency:
    """Warm `Planner.plan` latency on one task, without and with learned costs (medians of `rounds` calls,
    interleaved). The learned call includes the cost lookup (cached per task and situation), the search with
    learned costs and recording the plan in SQLite; `cost_lookup_cold_ms` is one `learned_costs` call right after
    `reload_model` (cache empty: grounding list plus one predict_proba); `cost_lookup_warm_ms` a cache hit."""

    rounds: int
    plain_ms: float  # no trace store
    recorded_ms: float  # a trace store that records the plan, no model: what learned costs are measured against
    learned_ms: float
    overhead: float  # learned vs recorded: what learned costs themselves add
    store_overhead: float  # recorded vs plain: what recording every plan in SQLite adds
    cost_lookup_cold_ms: float
    cost_lookup_warm_ms: float  # a cache hit, as in every learned call above


@dataclass
class Evaluation:
    episodes: int
    retrain_every: int
    window: int
    seed: int
    lam: float
    outcomes: list[Outcome]
    model_versions: int
    seconds: float
    latency: Latency | None = None
    retrain_seconds: list[float] = field(default_factory=list)
    model_params: dict[str, float | None] = field(default_factory=dict)

    def of(self, arm: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.arm == arm]
