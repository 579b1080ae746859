"""The stratification of a domain's derived predicates (which parts of PDDL a task uses: `Task.requirements_used`).

Planners differ in what they accept: Fast Downward takes the whole classical fragment the model holds, pyperplan
only STRIPS with typing. `Task.requirements_used` (in `domains.model`, on which this module builds) reads what the
task really uses (a domain may declare `:adl` and use none of it, or use negation without declaring anything), so
a delegate can decline in microseconds instead of failing inside a worker.

Derived predicates are evaluated stratum by stratum (PDDL 2.2): a predicate that depends on another through a
negation must come in a later stratum, and a cycle through negation has no meaning. `axiom_strata` computes the
strata once per domain; the reader refuses unstratifiable domains with a message.
"""

from __future__ import annotations

from collections.abc import Iterator

from domains.graphs import strongly_connected_components
from domains.model import And, Atom, Domain, Exists, Forall, Formula, Imply, Not, Or


def _dependencies(formula: Formula, derived: frozenset[str], positive: bool = True) -> Iterator[tuple[str, bool]]:
    """(derived predicate, occurs positively) for every derived atom in `formula`."""
    if isinstance(formula, Atom):
        if formula.predicate in derived:
            yield formula.predicate, positive
    elif isinstance(formula, Not):
        yield from _dependencies(formula.arg, derived, not positive)
    elif isinstance(formula, (And, Or)):
        for part in formula.parts:
            yield from _dependencies(part, derived, positive)
    elif isinstance(formula, Imply):
        yield from _dependencies(formula.condition, derived, not positive)
        yield from _dependencies(formula.consequence, derived, positive)
    elif isinstance(formula, (Exists, Forall)):
        yield from _dependencies(formula.body, derived, positive)


def axiom_strata(domain: Domain) -> list[list[str]]:
    """The derived predicates in strata: every predicate a rule depends on positively is in the same or an
    earlier stratum, negatively in an earlier one. Raises ValueError naming a predicate on a cycle through
    negation (no stratification exists)."""
    derived = domain.derived_predicates
    positive: dict[str, set[str]] = {p: set() for p in derived}
    negative: dict[str, set[str]] = {p: set() for p in derived}
    for axiom in domain.axioms:
        for used, polarity in _dependencies(axiom.body, derived):
            (positive if polarity else negative)[axiom.head.predicate].add(used)
    level = {p: 0 for p in derived}
    # Bellman-Ford style relaxation: levels only rise; reaching |derived| means a cycle through negation.
    for _ in range(len(derived) + 2):
        changed = False
        for head in sorted(derived):
            want = max([level[u] for u in positive[head]] + [level[u] + 1 for u in negative[head]], default=0)
            if want > level[head]:
                if want >= len(derived):  # a valid stratum is at most len(derived) - 1
                    raise ValueError(
                        f"derived predicate '{head}' depends on its own negation; the derived "
                        "predicates cannot be stratified"
                    )
                level[head], changed = want, True
        if not changed:
            break
    strata: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for predicate in sorted(derived):
        strata[level[predicate]].append(predicate)
    return [stratum for stratum in strata if stratum]


def axiom_order(domain: Domain) -> list[tuple[tuple[str, ...], bool]]:
    """The derived predicates as strongly connected components of their dependency graph, each after every
    component it depends on, with whether it is recursive (needs a fixpoint rather than one pass). In a
    stratifiable domain no component contains a negative dependency, so this order also respects the strata."""
    derived = domain.derived_predicates
    uses: dict[str, set[str]] = {p: set() for p in derived}
    for axiom in domain.axioms:
        uses[axiom.head.predicate].update(u for u, _ in _dependencies(axiom.body, derived))
    components = strongly_connected_components(sorted(derived), lambda predicate: sorted(uses[predicate]))
    return [(tuple(sorted(c)), len(c) > 1 or c[0] in uses[c[0]]) for c in components]
