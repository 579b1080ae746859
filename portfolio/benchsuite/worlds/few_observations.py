"""The `few-observations` worlds: an agent's tool calls, where each action has only 1-3 groundings (tools) and
each is called tens of times in a run, so the model must price tools from few observations.

    world = make_world("few-observations", 3)     # through family.make_world, which calls `layout`
    spec = world.episode(5)                        # spec.cargo: the capabilities the episode's goal asks for

The domain `agent`: 4-6 capabilities (actions such as `search` or `summarize`), drawn from the seed, each served
by 1-3 tools (its groundings: `(search search-a)`); a capability may need an earlier one done first (drawn). A
tool's price (the task's action cost) is 1 for the cheapest of its action, 2 and 3 for the others. A seed-drawn
subset of the actions with 2+ tools (at least one, about half) has its cheapest tool failing 30-60% (drawn per
tool); every other tool fails 2%. So every bad tool has a working alternative, dearer by 1: under unit costs
(cost-blind) the bad tool is chosen, under the true costs (lam = 5: 1 + 5 * -log 0.7 = 2.8 against 2.1) the
alternative. Each episode's goal asks for 1-2 capabilities (their prerequisites come with them): in 200
episodes an action is called 30-160 times (seeds 0-5), shared by its tools, so a bad tool is seen a few times
before the plans leave it. The truth does not change.
"""

from __future__ import annotations

import random

from domains.model import GroundAction, Task
from portfolio.benchsuite.worlds.model import Episode, WorldData, problem_text

CAPABILITIES = ("search", "fetch", "extract", "summarize", "translate", "notify")
OTHER_P = 0.02

DOMAIN = """(define (domain agent)
  (:requirements :strips :typing :action-costs)
  (:types {types} - tool)
  (:predicates {predicates})
  (:functions (total-cost) - number (price ?t - tool) - number)
{actions})
"""

ACTION = """  (:action {name} :parameters (?t - {name}-tool){precondition}
    :effect (and (done-{name}) (increase (total-cost) (price ?t))))
"""


def layout(rng: random.Random) -> tuple[tuple[str, ...], dict[str, str], frozenset, None, dict]:
    """A few-observations world's (places, vehicles, roads, lengths, bad) for `family.World`: `vehicles` holds the
    tools (name -> type `<action>-tool`); `bad` the actions in order (`actions`), each one's prerequisite or
    None (`needs`), the tools' prices (`price`) and the bad tools' p_fail (`tools`)."""
    actions = CAPABILITIES[: rng.randint(4, 6)]
    tools: dict[str, str] = {}
    price: dict[str, int] = {}
    multi = []
    for i, action in enumerate(actions):
        n = rng.randint(2, 3) if i == 0 else rng.randint(1, 3)  # the first always has an alternative
        for j in range(n):
            name = f"{action}-{'abc'[j]}"
            tools[name], price[name] = f"{action}-tool", j + 1
        if n >= 2:
            multi.append(action)
    chosen = rng.sample(multi, max(1, len(multi) // 2))
    needs = {a: (rng.choice(actions[:i]) if i and rng.random() < 0.5 else None) for i, a in enumerate(actions)}
    bad = {
        "actions": actions,
        "needs": needs,
        "price": price,
        "tools": {f"{a}-a": round(rng.uniform(0.3, 0.6), 3) for a in sorted(chosen)},
    }
    return (), tools, frozenset(), None, bad


def episode(world: WorldData, index: int, rng: random.Random, context: dict) -> Episode:
    """The goal's capabilities, in `cargo` as (capability, "", "") triples."""
    wanted = sorted(rng.sample(world.bad["actions"], rng.choice((1, 2))))
    return Episode(index, "", "", context, cargo=tuple((a, "", "") for a in wanted))


def task(world: WorldData, spec: Episode) -> Task:
    from domains.pddl import parse_task

    actions, needs = world.bad["actions"], world.bad["needs"]
    body = "".join(
        ACTION.format(name=a, precondition=f" :precondition (done-{needs[a]})" if needs[a] else "") for a in actions
    )
    domain = DOMAIN.format(
        types=" ".join(f"{a}-tool" for a in actions), predicates=" ".join(f"(done-{a})" for a in actions), actions=body
    )
    objects = " ".join(f"{t} - {kind}" for t, kind in world.vehicles.items())
    init = ["(= (total-cost) 0)"] + [f"(= (price {t}) {p})" for t, p in world.bad["price"].items()]
    goal = " ".join(f"(done-{a})" for a, _, _ in spec.cargo)
    name = f"{world.name}-{'-'.join(a for a, _, _ in spec.cargo)}"
    problem = problem_text(name, "agent", objects, init, goal, metric=True)
    return parse_task(domain, problem, f"{world.name}.domain", f"{name}.problem")


def p_fail(world: WorldData, step: GroundAction) -> float:
    """The hidden probability that `step` fails: its tool's (no situation dependence, no change)."""
    return world.bad["tools"].get(step.args[0], OTHER_P) if step.args else OTHER_P
