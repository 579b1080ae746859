"""Strongly connected components (`domains.graphs`): the components a brute-force reachability check finds, each
after every component it reaches, in an order that is a function of the input's order, and no recursion limit."""

from __future__ import annotations

import random

from domains.graphs import strongly_connected_components


def _reaches(edges: dict[int, set[int]], start: int) -> set[int]:
    seen, stack = {start}, [start]
    while stack:
        for child in edges[stack.pop()]:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def test_a_hand_drawn_graph():
    # 0 <-> 1 -> 2 -> 3 -> 2, 4 -> 0, 5 alone with a self-loop
    edges = {0: [1], 1: [0, 2], 2: [3], 3: [2], 4: [0], 5: [5]}
    assert strongly_connected_components(range(6), edges.__getitem__) == [[3, 2], [1, 0], [4], [5]]


def test_the_components_are_mutual_reachability_and_come_after_what_they_reach():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 15)
        edges = {a: {b for b in range(n) if rng.random() < 0.2} for a in range(n)}
        components = strongly_connected_components(range(n), lambda v: sorted(edges[v]))
        reach = {v: _reaches(edges, v) for v in range(n)}
        assert sorted(v for c in components for v in c) == list(range(n))
        for component in components:
            assert {w for w in range(n) if component[0] in reach[w] and w in reach[component[0]]} == set(component)
        position = {v: i for i, c in enumerate(components) for v in c}
        for a in range(n):
            assert all(position[b] <= position[a] for b in edges[a])  # what `a` reaches is completed first


def test_the_order_follows_the_input():
    edges = {"a": ["b", "c"], "b": [], "c": []}
    assert strongly_connected_components("abc", edges.__getitem__) == [["b"], ["c"], ["a"]]
    assert strongly_connected_components("abc", lambda v: edges[v][::-1]) == [["c"], ["b"], ["a"]]
    assert strongly_connected_components("cba", edges.__getitem__) == [["c"], ["b"], ["a"]]


def test_a_long_chain_needs_no_recursion():
    n = 50_000  # far past Python's recursion limit
    ring = strongly_connected_components(range(n), lambda v: [(v + 1) % n])
    assert len(ring) == 1 and len(ring[0]) == n
    chain = strongly_connected_components(range(n), lambda v: [v + 1] if v + 1 < n else [])
    assert chain == [[v] for v in reversed(range(n))]
