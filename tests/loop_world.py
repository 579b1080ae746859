"""The small typed world the agent-loop tests run (`tests/test_loop.py`, `tests/test_plan_reuse.py`): start -> B ->
C -> D with a dearer route to C, actions that fail on request, and a planner spy that keeps each call's
critiques. A module of its own so that test files import it, not each other."""

from __future__ import annotations

from dataclasses import dataclass

from domains.typed_actions import action


@dataclass
class Start:
    text: str = "go"


@dataclass
class B:
    v: int = 1


@dataclass
class C:
    v: int = 2


@dataclass
class D:
    v: int = 3


def chain(**fails):
    """start -> B -> C -> D, plus a dearer alternative route to C. `fails` maps action names to exceptions."""

    def maybe(name):
        if name in fails:
            error = fails[name]
            raise error() if isinstance(error, type) else error

    @action(cost=1)
    def make_b(s: Start) -> B:
        maybe("make_b")
        return B()

    @action(cost=1)
    def make_c(b: B) -> C:
        maybe("make_c")
        return C()

    @action(cost=5)
    def make_c_slowly(b: B) -> C:
        maybe("make_c_slowly")
        return C(9)

    @action(cost=1, goal=True)
    def make_d(b: B, c: C) -> D:
        maybe("make_d")
        return D()

    return [make_b, make_c, make_c_slowly, make_d]


class SpyPlanner:
    """The real planner, with the critiques of every call kept for inspection."""

    def __init__(self, planner):
        self.planner, self.critiques = planner, []

    def plan(self, task, **kwargs):
        self.critiques.append(list(kwargs.get("critiques", ())))
        return self.planner.plan(task, **kwargs)

    def reload_model(self):
        self.planner.reload_model()
