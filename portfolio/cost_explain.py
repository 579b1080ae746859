"""Why learned costs changed a plan: the plan the task's own (base) costs give beside the learned one, and the
evidence against each step of the base-cost plan that the learned plan avoided.

`explain_learned_plan` is what `Planner.explain` returns and `portfolio plan --explain` shows. The evidence is the
row `portfolio costs` prints for that action (`learning.costs.cost_rows` of `Planner.learned_costs`): steps and
failures recorded, steps since its rate last changed, when last seen, p_fail with its 90% credible interval. It
is read from the same model the plan was priced with, not recomputed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from learning.costs import ActionCost
    from portfolio.engine.results import PlanResult

NOTHING_LEARNED = (
    "nothing learned to explain: the plan was made under the task's own costs (no trace store with a trained model)"
)

NO_LEARNED_PLAN = "no plan under learned costs: nothing to compare"


class CostExplanation(BaseModel):
    """What learned costs changed in one plan. `learned` is False when the plan was made under the task's own
    costs (no trace store, or no trained model in it): then `note` says so and nothing else is filled in."""

    learned: bool = Field(description="Whether the plan was made under learned costs")
    note: str | None = Field(default=None, description="Why there is nothing to compare, when there is not")
    base_status: str | None = Field(default=None, description="The status of the plan under base costs")
    base_plan: list[str] = Field(default_factory=list, description="The plan under the task's own costs")
    base_cost: float | None = Field(default=None, description="The base-cost plan's cost under base costs")
    base_learned_cost: float | None = Field(
        default=None, description="The base-cost plan's cost under the learned costs the learned plan was made with"
    )
    base_success_probability: float | None = Field(
        default=None, description="Predicted probability that every step of the base-cost plan succeeds"
    )
    learned_plan: list[str] = Field(default_factory=list, description="The plan under learned costs")
    avoided: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each step of the base-cost plan the learned plan does not take, in plan order, as "
        "`portfolio costs --json` shows it (p_fail, p_fail_90, steps, failures, since_change, runs_ago, last_seen...)",
    )

    @property
    def changed(self) -> bool:
        """Whether learned costs gave another plan than base costs did."""
        return self.learned and bool(self.base_plan) and self.base_plan != self.learned_plan


def avoided_steps(base_plan: Iterable[str], learned_plan: Iterable[str]) -> list[str]:
    """The steps of `base_plan` that `learned_plan` does not take, in base-plan order, each once."""
    taken = set(learned_plan)
    seen: set[str] = set()
    avoided = []
    for step in base_plan:
        if step not in taken and step not in seen:
            seen.add(step)
            avoided.append(step)
    return avoided


def explain_learned_plan(learned: PlanResult, base: PlanResult, costs: Mapping[str, ActionCost]) -> CostExplanation:
    """Explain `learned`, a plan made under learned costs, against `base`, the same task planned under its own
    costs, with `costs` the learned costs it was priced with, described (`Planner.learned_costs`: evidence and
    intervals in): for each step of `base` that `learned` avoided, its `cost_rows` row, in `base`'s order. Either
    plan missing: `note` says there is nothing to compare. `Planner.explain` gathers the three."""
    from learning.costs import cost_rows, plan_price

    if not learned.solved:
        return CostExplanation(learned=True, note=NO_LEARNED_PLAN)
    explanation = CostExplanation(
        learned=True, base_status=base.status.value, base_plan=base.plan, base_cost=base.cost, learned_plan=learned.plan
    )
    if not base.solved:
        explanation.note = f"no plan under base costs ({base.status.value}): nothing to compare"
        return explanation
    price = plan_price(costs, base.plan)
    if price is not None:
        explanation.base_learned_cost = price.cost
        explanation.base_success_probability = price.success_probability
    avoided = avoided_steps(base.plan, learned.plan)
    rows = {row["action"]: row for row in cost_rows({step: costs[step] for step in avoided if step in costs})}
    explanation.avoided = [rows[step] for step in avoided if step in rows]
    return explanation


def explanation_lines(explanation: CostExplanation) -> list[str]:
    """The plain form of `explanation`: comment lines (without the leading "; ") that `portfolio plan --explain`
    prints after the plan, so its output stays a plan file."""
    if explanation.note:  # nothing learned, or nothing to compare
        return [f"explain: {explanation.note}"]
    if not explanation.changed:
        return ["explain: the plan under base costs is the same; learned costs changed nothing"]
    head = f"explain: the plan under base costs (cost {explanation.base_cost:g}"
    if explanation.base_learned_cost is not None:
        head += f", {explanation.base_learned_cost:.3f} learned"
    if explanation.base_success_probability is not None:
        head += f", success probability {explanation.base_success_probability:.3f}"
    lines = [head + "):", *(f"  {step}" for step in explanation.base_plan)]
    if not explanation.avoided:
        return [*lines, "explain: the learned plan takes every step of it, in another order"]
    lines.append("explain: the learned plan avoids")
    for row in explanation.avoided:
        lines.append(f"  {row['action']}: {_evidence(row)}")
    return lines


def _evidence(row: dict[str, Any]) -> str:
    """One avoided step's evidence, in the words of `portfolio costs`' columns."""
    from learning.costs import last_seen_text

    text = f"{row['steps']} steps, {row['failures']} failures"
    if row["since_change"] != row["steps"]:
        text += f" ({row['since_change']} steps, {row['failures_since']} failures since its rate last changed)"
    text += ", never seen" if row["runs_ago"] is None else f", last seen {last_seen_text(row)}"
    if row.get("shared_change"):
        text += f", shares a change seen on an action alike but for one object (probability {row['shared_change']:.2f})"
    text += f", p_fail {row['p_fail']:.3f}"
    if "p_fail_90" in row:
        low, high = row["p_fail_90"]
        text += f" (90% interval {low:.2f}-{high:.2f})"
    return text
