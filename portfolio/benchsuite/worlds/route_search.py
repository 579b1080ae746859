"""`RouteSearch`: an exact, in-process delegate for the routes domain of `family.py`.

The benchmark uses it only as a yardstick (`exact.ExactSearch`: the oracle arm, and the optimum a learned call's
plan is compared with): the measured arms plan with the default cascade, as users' tasks are planned.

The learning benchmark plays ~100,000 planning calls, so each must cost well under a millisecond. The generic
in-process delegate (`portfolio.delegates.typed_search`) grounds every (vehicle, place, place) triple and runs
A* with h_max over all of them: 20-300 ms per call on these tasks. The routes domain has one structure (choose
a vehicle, drive along roads, arrive), so Dijkstra over (vehicle, place) on the roads of the initial state is
exact and takes microseconds. It is a `Delegate` like any other: the Planner hands it learned costs through
`request.grounded_costs` (for the grounded actions it lists: real roads only), and the cascade validates its
plans. Any other task is declined, and the next delegate in the stage takes it.
"""

from __future__ import annotations

import heapq
import itertools

from domains.model import GroundAction, Task, action_cost
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status


def _facts(state, predicate: str) -> list[tuple[str, ...]]:
    # sorted: a state is a set, whose order follows Python's per-process string hashing; ties between equal-cost
    # routes must not depend on it, or two runs of one seeded world differ
    return sorted(atom.args for atom in state if atom.predicate == predicate)


class RouteSearch(Delegate):
    name = "route-search"
    source = "classical"
    budget_s: float | None = None

    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        task: Task = request.task
        if task.domain.name != "routes":
            return DelegateOutcome(Status.ERROR, reason="declined: not a routes task")
        state = request.initial_state
        at = _facts(state, "at")
        roads = _facts(state, "road")
        dests = {args[0] for args in _facts(state, "dest")}
        vehicles = [v for v, _ in at]
        actions = [GroundAction("choose", (v,)) for v in vehicles]
        actions += [GroundAction("drive", (v, a, b)) for v in vehicles for a, b in roads]
        actions += [GroundAction("arrive", (v, d)) for v in vehicles for d in dests]
        names = [str(a) for a in actions]
        given = request.grounded_costs(names) or {}
        cost = {
            name: (float("inf") if name in request.excluded else given.get(name, action_cost(task, action)))
            for name, action in zip(names, actions)
        }
        return self._dijkstra(at, roads, dests, cost)

    @staticmethod
    def _dijkstra(at, roads, dests, cost) -> DelegateOutcome:
        out: dict[str, list[str]] = {}
        for a, b in roads:
            out.setdefault(a, []).append(b)
        frontier: list = []
        best: dict = {}
        tie = itertools.count()  # plans never compare: equal costs pop first-pushed first
        for v, place in at:
            c = cost[f"(choose {v})"]
            frontier.append((c, next(tie), (v, place), [GroundAction("choose", (v,))]))
        heapq.heapify(frontier)
        while frontier:
            g, _, (v, place), plan = heapq.heappop(frontier)
            if g == float("inf"):
                break
            if v == "":
                return DelegateOutcome(Status.SOLVED, plan=plan)
            if best.get((v, place), float("inf")) <= g:
                continue
            best[(v, place)] = g
            if place in dests:
                c = cost[f"(arrive {v} {place})"]
                heapq.heappush(frontier, (g + c, next(tie), ("", ""), plan + [GroundAction("arrive", (v, place))]))
            for nxt in out.get(place, ()):
                c = cost[f"(drive {v} {place} {nxt})"]
                heapq.heappush(frontier, (g + c, next(tie), (v, nxt), plan + [GroundAction("drive", (v, place, nxt))]))
        return DelegateOutcome(Status.UNSOLVABLE, reason="no route to a destination")

    def close(self) -> None:
        pass
