"""The in-process exact delegate for tiny tasks (typed agent actions, small PDDL agent domains).

Replanning after every step of an agent must cost milliseconds, and even a pre-started Fast Downward search
process costs more than that in pipes and process start-up (measured in `benchmarks/bench_replan.py`). Tasks
compiled from typed actions have a handful of facts and parameterless actions, so an exact A* in this process
is cheaper than any hand-off. This delegate grounds the task (once per task object), and when it has at most
`max_ground_actions` grounded actions runs A* with the admissible h_max heuristic (`portfolio.delegates.relaxed`)
on bitmask states (STRIPS tasks) or uniform-cost search through the validator's simulator (anything else), under
the deadline and a node cap. Larger tasks are declined by `supports` in microseconds (`unsupported`) and the
cascade moves on to Fast Downward. It runs in the caller's process: the deadline is checked every 64 expansions
(A*) or every expansion (uniform-cost), and the node cap reports `memout`. Its plans are validated by the cascade
like everyone else's; exhausting the reachable states (h_max only prunes true dead ends) proves the task
unsolvable.

Costs: `request.costs` (learned costs) when given, else the task's own costs. Excluded actions are never used.
"""

from __future__ import annotations

import heapq
import itertools
import time
import weakref
from dataclasses import dataclass
from typing import Any

from domains.model import TRUE, And, Atom, GroundAction, Task, action_cost
from domains.validate import applicable, apply, goal_reached
from portfolio.delegates import relaxed
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status

_INF = float("inf")


@dataclass(frozen=True)
class _Ground:
    actions: tuple[GroundAction, ...]
    names: tuple[str, ...]  # PDDL form, for costs and exclusions
    strips: bool
    atoms: dict[Atom, int]  # atom -> bit (STRIPS only)
    pre: tuple[int, ...]
    add: tuple[int, ...]
    delete: tuple[int, ...]
    pre_bits: tuple[tuple[int, ...], ...]
    add_bits: tuple[tuple[int, ...], ...]
    goal: int | None  # goal mask when the goal is a conjunction of atoms


def _conjunction(formula: Any) -> list[Atom] | None:
    """The atoms of a positive conjunction (or single atom), None for anything else."""
    if isinstance(formula, Atom):
        return [formula]
    if isinstance(formula, And) and all(isinstance(p, Atom) for p in formula.parts):
        return [p for p in formula.parts if isinstance(p, Atom)]  # all of them (checked above)
    return None


def _bind(atom: Atom, env: dict[str, str]) -> Atom:
    return Atom(atom.predicate, tuple(env.get(a, a) for a in atom.args))


def ground(task: Task, limit: int) -> _Ground | None:
    """All grounded actions of `task`, with bitmask preconditions/effects when the task is STRIPS; None when
    there are more than `limit`."""
    actions: list[GroundAction] = []
    for schema in task.domain.actions:
        domains = [task.objects_of_type(p.type) for p in schema.parameters]
        count = 1
        for d in domains:
            count *= len(d)
        if len(actions) + count > limit:
            return None
        actions.extend(GroundAction(schema.name, combo) for combo in itertools.product(*domains))
    names = tuple(str(a) for a in actions)
    # Derived predicates are computed, never stored in a state: only the simulator handles them.
    strips = (
        task.is_strips
        and all(_conjunction(s.precondition) is not None or s.precondition == TRUE for s in task.domain.actions)
        and all(e.condition == TRUE and not e.parameters for s in task.domain.actions for e in s.effects)
    )
    goal_atoms = _conjunction(task.problem.goal)
    if not strips:
        return _Ground(tuple(actions), names, False, {}, (), (), (), (), (), None)
    atoms: dict[Atom, int] = {}

    def mask(found: list[Atom]) -> tuple[int, tuple[int, ...]]:
        bits = tuple(atoms.setdefault(a, len(atoms)) for a in found)
        return sum(1 << b for b in set(bits)), tuple(sorted(set(bits)))

    pre, add, delete, pre_bits, add_bits = [], [], [], [], []
    for act in actions:
        act_schema = task.domain.action(act.name)
        assert act_schema is not None
        env = {p.name: a for p, a in zip(act_schema.parameters, act.args)}
        p_mask, p_bits = mask([_bind(a, env) for a in (_conjunction(act_schema.precondition) or [])])
        a_mask, a_bits = mask([_bind(e.atom, env) for e in act_schema.effects if not e.negated])
        d_mask, _ = mask([_bind(e.atom, env) for e in act_schema.effects if e.negated])
        pre.append(p_mask)
        add.append(a_mask)
        delete.append(d_mask & ~a_mask)  # PDDL: add wins
        pre_bits.append(p_bits)
        add_bits.append(a_bits)
    goal = mask(goal_atoms)[0] if goal_atoms is not None else None
    return _Ground(
        tuple(actions),
        names,
        True,
        atoms,
        tuple(pre),
        tuple(add),
        tuple(delete),
        tuple(pre_bits),
        tuple(add_bits),
        goal,
    )


class TypedSearch(Delegate):
    """Exact in-process search for tiny tasks (see the module docstring)."""

    source = "classical"

    def __init__(
        self,
        max_ground_actions: int = 200,
        max_nodes: int = 50_000,
        budget_s: float | None = None,
        name: str = "typed-search",
    ) -> None:
        self.name = name
        self.budget_s = budget_s
        self.max_ground_actions = max_ground_actions
        self.max_nodes = max_nodes
        self._cache: dict[int, tuple[weakref.ref, _Ground | None]] = {}

    def _ground(self, task: Task) -> _Ground | None:
        hit = self._cache.get(id(task))
        if hit is not None and hit[0]() is task:
            return hit[1]
        grounded = ground(task, self.max_ground_actions)
        key = id(task)

        def forget(_ref: object, key: int = key) -> None:
            self._cache.pop(key, None)

        self._cache[key] = (weakref.ref(task, forget), grounded)
        return grounded

    def supports(self, task: Task) -> bool:
        """Tiny tasks only: grounding stops counting past `max_ground_actions` (and is cached for `solve`)."""
        return self._ground(task) is not None

    def decline_reason(self, task: Task) -> str:
        return f"more than {self.max_ground_actions} grounded actions (left to the next delegate)"

    def warm_up(self) -> None:
        """Nothing to start: it runs in the caller's process."""

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        grounded = self._ground(request.task)
        if grounded is None:
            return DelegateOutcome(Status.UNSUPPORTED, reason=self.decline_reason(request.task))
        costs = request.grounded_costs(grounded.names) or {}
        task = request.task
        usable = [i for i, name in enumerate(grounded.names) if not request.is_excluded(name)]
        cost = [_INF] * len(grounded.actions)
        for i in usable:
            cost[i] = costs.get(grounded.names[i], action_cost(task, grounded.actions[i]))
        if grounded.strips and grounded.goal is not None:
            return self._astar(grounded, request, usable, cost, deadline)
        return self._uniform(grounded, request, usable, cost, deadline)

    # -- STRIPS: A* with h_max on bitmask states -------------------------------------------------------------
    def _astar(
        self, g: _Ground, request: PlanRequest, usable: list[int], cost: list[float], deadline: float
    ) -> DelegateOutcome:
        start = sum(1 << bit for atom, bit in g.atoms.items() if atom in request.initial_state)
        goal = g.goal
        assert goal is not None
        goal_bits = [b for b in range(len(g.atoms)) if goal >> b & 1]
        pre, add, delete = g.pre, g.add, g.delete
        n_atoms = len(g.atoms)
        relaxation = relaxed.relaxation(
            n_atoms, ((g.pre_bits[i], bit, i) for i in usable for bit in g.add_bits[i]), goal_bits
        )
        unary_cost = relaxed.unary_costs(relaxation, cost)

        def h_max(state: int) -> float:
            value = relaxed.h_max(relaxation, [b for b in range(n_atoms) if state >> b & 1], unary_cost)
            return _INF if value is None else value

        counter = itertools.count()
        best = {start: 0.0}
        parent: dict[int, tuple[int, int]] = {}
        frontier = [(h_max(start), next(counter), 0.0, start)]
        expanded = 0
        while frontier:
            _f, _tie, g_cost, state = heapq.heappop(frontier)
            if g_cost > best.get(state, _INF):
                continue
            if state & goal == goal:
                return self._solved(g, parent, state, start, expanded)
            expanded += 1
            if expanded > self.max_nodes or (expanded & 63 == 0 and time.monotonic() > deadline):
                return self._gave_up(expanded)
            for i in usable:
                if state & pre[i] != pre[i]:
                    continue
                nxt = (state & ~delete[i]) | add[i]
                if nxt == state:
                    continue  # a self-loop never helps
                new_cost = g_cost + cost[i]
                if new_cost < best.get(nxt, _INF):
                    h = h_max(nxt)
                    if h == _INF:
                        continue
                    best[nxt] = new_cost
                    parent[nxt] = (state, i)
                    heapq.heappush(frontier, (new_cost + h, next(counter), new_cost, nxt))
        return DelegateOutcome(
            Status.UNSOLVABLE, reason=f"no plan: {expanded} reachable states exhausted", details={"expanded": expanded}
        )

    def _gave_up(self, expanded: int) -> DelegateOutcome:
        if expanded > self.max_nodes:
            return DelegateOutcome(Status.MEMOUT, reason=f"node limit ({self.max_nodes}) reached")
        return DelegateOutcome(Status.TIMEOUT, reason=f"budget expired after {expanded} nodes")

    def _solved(
        self, g: _Ground, parent: dict[int, tuple[int, int]], state: int, start: int, expanded: int
    ) -> DelegateOutcome:
        steps: list[GroundAction] = []
        while state != start:
            state, index = parent[state]
            steps.append(g.actions[index])
        steps.reverse()
        return DelegateOutcome(Status.SOLVED, plan=steps, details={"expanded": expanded})

    # -- anything else: uniform-cost search through the validator's simulator -----------------------------
    def _uniform(
        self, g: _Ground, request: PlanRequest, usable: list[int], cost: list[float], deadline: float
    ) -> DelegateOutcome:
        task = request.task
        start = frozenset(request.initial_state)
        counter = itertools.count()
        best = {start: 0.0}
        parent: dict[frozenset, tuple[frozenset, int]] = {}
        frontier = [(0.0, next(counter), start)]
        expanded = 0
        while frontier:
            g_cost, _tie, state = heapq.heappop(frontier)
            if g_cost > best.get(state, _INF):
                continue
            if goal_reached(task, state):
                steps = []
                while state != start:
                    state, index = parent[state]
                    steps.append(g.actions[index])
                return DelegateOutcome(Status.SOLVED, plan=steps[::-1], details={"expanded": expanded})
            expanded += 1
            if expanded > self.max_nodes or time.monotonic() > deadline:
                return self._gave_up(expanded)
            for i in usable:
                if not applicable(task, state, g.actions[i]):
                    continue
                nxt = apply(task, state, g.actions[i])
                new_cost = g_cost + cost[i]
                if nxt != state and new_cost < best.get(nxt, _INF):
                    best[nxt] = new_cost
                    parent[nxt] = (state, i)
                    heapq.heappush(frontier, (new_cost, next(counter), nxt))
        return DelegateOutcome(Status.UNSOLVABLE, reason=f"no plan: {expanded} reachable states exhausted")

    def close(self) -> None:
        self._cache.clear()
