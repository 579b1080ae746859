"""Why the agent gives up, in words a person can act on.

A planner that finds no plan says `unsolvable` and how far its search went; that is true, but the same sentence
then covers very different situations that need different fixes: every provider of flights failed
(fix or add a provider), an async action timed out three times (raise its timeout), the goal needs a hotel that
no action produces (write that action). So when a run concedes for want of a plan, the loop names the cause:

- `no action produces X`: X is needed (by the goal, or by the only actions that lead to it) and no action has
  it as an effect, whatever failed: the action set is incomplete.
- `every action producing X failed`: actions for X exist, but every one of them failed in this run and was
  excluded; each is listed with what happened to it (`timed out 3 times`, `failed: knowledge x1 (...)`).

Both come from a delete-relaxed reachability over the action schemas and derived-predicate rules, at the level
of predicate names (an action counts as usable when every predicate of its positive preconditions can be made
true). That
over-approximates what is reachable, so what it calls unreachable really is: the reasons are never wrong, only
sometimes missing, and then the planner's own words are kept. Typed actions (`domains.typed_actions`) are all
parameterless, so for them it is exact; their facts `(known-flights)` are named by their types, `Flights`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from domains.explain import required_atoms
from domains.model import ActionSchema, Atom, State, Task
from portfolio.agent.loop_types import StepResult
from portfolio.delegates.relaxed import INFINITY, layers, relaxation

# a builtin timeout, or the runtime's own for `@action(timeout=S)` (`portfolio.agent.executors`)
TIMEOUT = re.compile(r"^(\w+\.)?TimeoutError\b| timed out after ")


def _adds(schema: ActionSchema) -> set[str]:
    return {effect.atom.predicate for effect in schema.effects if not effect.negated}


def reachable(task: Task, state: State, blocked: Iterable[str] = ()) -> set[str]:
    """Predicate names that can be made true from `state`, without the schemas named in `blocked`: the relaxed
    task over predicate names (`portfolio.delegates.relaxed`), a schema or a derived predicate's rule adding its
    predicates once every predicate its condition requires outright is reached."""
    blocked = set(blocked)
    rules = [(required_atoms(s.precondition), _adds(s)) for s in task.domain.actions if s.name not in blocked]
    rules += [(required_atoms(axiom.body), {axiom.head.predicate}) for axiom in task.domain.axioms]
    known = {atom.predicate for atom in state}
    names = sorted(known.union(*(adds for _, adds in rules), (a.predicate for needs, _ in rules for a in needs)))
    number = {name: index for index, name in enumerate(names)}
    unary = [
        ({number[a.predicate] for a in needs}, number[predicate], index)
        for index, (needs, adds) in enumerate(rules)
        for predicate in sorted(adds)
    ]
    found = layers(relaxation(len(names), unary, ()), [number[name] for name in known])
    return {name for name, layer in zip(names, found.cost, strict=True) if layer != INFINITY}


def fact_name(predicate: str) -> str:
    """`known-flight-offer` (a typed fact) -> `FlightOffer`; `known-source_city` -> `source (City)`; others as
    written."""
    if not predicate.startswith("known-"):
        return f"({predicate})"
    rest = predicate[len("known-") :]
    name, _, type_part = rest.rpartition("_") if "_" in rest else ("", "", rest)
    camel = "".join(word.capitalize() for word in type_part.split("-"))
    return f"{name} ({camel})" if name else camel


def outcome_summary(action: str, steps: Sequence[StepResult]) -> str:
    """What happened to `action` in this run: `(search-a) timed out 3 times`, `(search-b) failed: knowledge x1
    (LookupError: no seats)`."""
    failures = [s for s in steps if s.action == action and s.outcome == "failure"]
    if not failures:
        return f"{action} ruled out (vetoed, or chosen again and again in one state)"
    timeouts = sum(1 for s in failures if s.error and TIMEOUT.search(s.error))
    if timeouts == len(failures):
        return f"{action} timed out {timeouts} time{'s' if timeouts > 1 else ''}"
    counts = Counter(s.category or "failure" for s in failures)
    kinds = ", ".join(f"{category} x{n}" for category, n in counts.items())
    return f"{action} failed: {kinds} ({failures[-1].error})"


def give_up_reason(task: Task, state: State, excluded: Sequence[str], steps: Sequence[StepResult]) -> str | None:
    """The cause of "no plan" in a person's words (module docstring), or None when it cannot be named."""
    goal = [atom for atom in required_atoms(task.problem.goal) if atom not in state]
    if not goal:
        return None
    everything = reachable(task, state)
    producers: dict[str, list[ActionSchema]] = {}
    for schema in task.domain.actions:
        for predicate in _adds(schema):
            producers.setdefault(predicate, []).append(schema)
    derived = {axiom.head.predicate for axiom in task.domain.axioms}
    missing = [p for p in _roots(goal, everything, producers) if p not in derived]
    if missing:
        names = ", ".join(fact_name(p) for p in missing)
        return f"no action produces {names}"
    blocked = {text.strip("()").split()[0] for text in excluded if text.strip("()").split()}
    # only parameterless excluded actions block their whole schema; others leave groundings to try
    blocked = {name for name in blocked if (s := task.domain.action(name)) is not None and not s.parameters}
    without = reachable(task, state, blocked)
    lost = sorted(
        p
        for p in everything - without
        if p in producers and p not in derived and all(s.name in blocked for s in producers[p])
    )
    if not lost:
        return None
    parts = []
    for predicate in lost:
        tried = [text for text in excluded if text.strip("()").split()[0] in {s.name for s in producers[predicate]}]
        failed = all(any(s.action == text and s.outcome == "failure" for s in steps) for text in tried)
        verb = "failed" if failed else "failed or was ruled out"
        parts.append(
            f"every action producing {fact_name(predicate)} {verb}: "
            + ", ".join(outcome_summary(text, steps) for text in tried)
        )
    return "; ".join(parts)


def _roots(goal: list[Atom], reachable_now: set[str], producers: dict[str, list[ActionSchema]]) -> list[str]:
    """Predicates with no producer at all that the unreachable goal atoms need, directly or through the
    preconditions of their producers."""
    roots: list[str] = []
    seen: set[str] = set()
    todo = [atom.predicate for atom in goal if atom.predicate not in reachable_now]
    while todo:
        predicate = todo.pop(0)
        if predicate in seen or predicate in reachable_now:
            continue
        seen.add(predicate)
        if predicate not in producers:
            roots.append(predicate)
            continue
        for schema in producers[predicate]:
            todo.extend(a.predicate for a in required_atoms(schema.precondition))
    return roots
