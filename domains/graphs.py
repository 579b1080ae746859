"""Strongly connected components of a directed graph (Tarjan), for every part of the project that orders a graph
by them: the derived predicates' evaluation order (`domains.features.axiom_order`), the goal agenda's entries
(`portfolio.delegates.goal_agenda`), the import-cycle check (`tests/test_layering.py`).

Iterative, so a long chain (thousands of modules, predicates or goals) cannot reach Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TypeVar

Node = TypeVar("Node", bound=Hashable)


def strongly_connected_components(
    nodes: Iterable[Node], successors: Callable[[Node], Iterable[Node]]
) -> list[list[Node]]:
    """The strongly connected components of the graph whose edges go from each node to its `successors`, in the
    order Tarjan's algorithm completes them: each component after every component it reaches (a reverse
    topological order of the condensation).

    The result is a function of the order of the input, which callers rely on for their tie-breaks: depth-first
    searches start from `nodes` in the order given (skipping nodes already visited), the successors of a node are
    followed in the order `successors` yields them, and a component lists its nodes in the order they leave
    Tarjan's stack (the node the search entered the component by comes last). Nodes reached only as successors
    belong to the graph too."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    stack: list[Node] = []
    on_stack: set[Node] = set()
    components: list[list[Node]] = []

    def enter(node: Node) -> tuple[Node, Iterator[Node]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return node, iter(successors(node))

    for root in nodes:
        if root in index:
            continue
        work = [enter(root)]
        while work:
            node, children = work[-1]
            for child in children:  # resumes where the last visit to `node` left its successors
                if child not in index:
                    work.append(enter(child))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:  # `node` is done: hand its low link up, and close its component if it is the root
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components
