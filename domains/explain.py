"""Why a task has no plan, in terms of its own atoms: which goal atoms cannot be reached, traced back to a fact
that no action adds and the initial state lacks.

    >>> for line in explain_unreachable(task):       # a robot that must light rooms b and c, no door to c
    ...     print(line)
    (lit c) cannot be reached: only light adds lit, and light ?r=c needs (at ?rob c); only move adds at, and
    move ?to=c needs (door ?from c), which no action adds and the initial state holds for no ?from

The reachability is delete-relaxed, over grounded atoms: starting from the initial state, an action adds its
positive effects once every atom its precondition requires outright (the conjuncts; anything under `or`, `not` or
a quantifier is left out) is reachable. That over-approximates what any plan can reach, so an atom it calls
unreachable really is; a task can still be unsolvable with every goal atom reachable (deletes, negative goals,
numeric costs aside), and then there is nothing to say here. The trace back follows, for each producer of a
missing atom, the first required atom that no reachable fact matches, until an atom no action adds (or a depth
of `MAX_DEPTH`). Bounded by `limit` bindings in all: a task too large to explore this way gets no explanation.
"""

from __future__ import annotations

from collections.abc import Iterable

from domains.joins import IndexedState, plan_join
from domains.model import And, Atom, Formula, Parameter, Task

MAX_DEPTH = 4
DEFAULT_LIMIT = 200_000


def required_atoms(formula: Formula) -> list[Atom]:
    """The atoms a condition requires outright: itself or the conjuncts of an `and`."""
    if isinstance(formula, Atom):
        return [formula]
    if isinstance(formula, And):
        return [atom for part in formula.parts for atom in required_atoms(part)]
    return []


class _Rule:
    """An action schema or derived-predicate rule, relaxed: parameters, required atoms, added atoms."""

    def __init__(self, name: str, parameters: tuple[Parameter, ...], needs: list[Atom], adds: list[Atom]) -> None:
        self.name, self.parameters, self.needs, self.adds = name, parameters, needs, adds


def _rules(task: Task) -> list[_Rule]:
    rules = []
    for schema in task.domain.actions:
        params = list(schema.parameters)
        adds = []
        for effect in schema.effects:
            if effect.negated:
                continue
            params += [p for p in effect.parameters if p not in params]  # a forall effect's own variables
            adds.append(effect.atom)
        rules.append(_Rule(schema.name, tuple(params), required_atoms(schema.precondition), adds))
    for axiom in task.domain.axioms:
        rules.append(_Rule(axiom.head.predicate, axiom.parameters, required_atoms(axiom.body), [axiom.head]))
    return rules


class _Budget(Exception):
    pass


def reachable_atoms(task: Task, init: Iterable[Atom] | None = None, limit: int = DEFAULT_LIMIT) -> set[Atom] | None:
    """Every atom the delete relaxation reaches from `init` (the task's initial state by default); None when
    more than `limit` rule bindings would be enumerated."""
    state = IndexedState(task.problem.init if init is None else init)
    rules = _rules(task)
    members: dict[str, frozenset[str]] = {}
    joins = []
    for rule in rules:
        names = tuple(p.name for p in rule.parameters)
        for p in rule.parameters:
            members.setdefault(p.type, frozenset(task.objects_of_type(p.type)))
        typed = {p.name: members[p.type] for p in rule.parameters}
        ordered = {p.name: tuple(sorted(members[p.type])) for p in rule.parameters}
        constant_needs = [a for a in rule.needs if not any(arg.startswith("?") for arg in a.args)]
        generators = [a for a in rule.needs if a not in constant_needs]
        joins.append((rule, plan_join(names, typed, ordered, generators, []), constant_needs))
    spent = 0
    grew = True
    while grew:
        grew = False
        for rule, join, constant_needs in joins:
            if not all(atom in state for atom in constant_needs):
                continue
            new = []
            for env in join(state, {}):
                spent += 1
                if spent > limit:
                    return None
                for atom in rule.adds:
                    grounded = Atom(atom.predicate, tuple(env.get(a, a) for a in atom.args))
                    if grounded not in state:
                        new.append(grounded)
            for atom in new:
                if atom not in state:
                    state.add(atom)
                    grew = True
    return set(state)


def explain_unreachable(task: Task, init: Iterable[Atom] | None = None, limit: int = DEFAULT_LIMIT) -> list[str]:
    """One sentence per goal atom the task's goal requires outright that the delete relaxation cannot reach
    from `init` (module docstring); [] when every one is reachable or the task is too large to tell."""
    start = set(task.problem.init if init is None else init)
    reached = reachable_atoms(task, start, limit)
    if reached is None:
        return []
    rules = _rules(task)
    lines = []
    for goal in required_atoms(task.problem.goal):
        if goal not in reached and not any(a.startswith("?") for a in goal.args):
            lines.append(f"{_show(goal)} cannot be reached: " + _why(goal, {}, rules, reached, set(), 0))
    return lines


def _show(atom: Atom) -> str:
    return f"({' '.join((atom.predicate, *atom.args))})"


def _matches(pattern: Atom, env: dict[str, str], facts: set[Atom]) -> bool:
    """Whether some fact matches `pattern` with the variables `env` binds fixed and the others free."""
    want = [env.get(a, a) for a in pattern.args]
    for fact in facts:
        if fact.predicate != pattern.predicate or len(fact.args) != len(want):
            continue
        seen: dict[str, str] = {}
        ok = True
        for w, got in zip(want, fact.args):
            if w.startswith("?"):
                if seen.setdefault(w, got) != got:
                    ok = False
                    break
            elif w != got:
                ok = False
                break
        if ok:
            return True
    return False


def _why(atom: Atom, env: dict[str, str], rules: list[_Rule], reached: set[Atom], seen: set[str], depth: int) -> str:
    """Why `atom` (its variables bound by `env` where bound) is out of reach, as a clause."""
    shown = _show(Atom(atom.predicate, tuple(env.get(a, a) for a in atom.args)))
    producers = [(rule, add) for rule in rules for add in rule.adds if add.predicate == atom.predicate]
    free = sorted({a for a in atom.args if a.startswith("?") and a not in env})
    nowhere = f" for no {', '.join(free)}" if free else ""
    if not producers:
        return f"{shown}, which no action adds and the initial state holds{nowhere or ' not'}"
    names = sorted({rule.name for rule, _ in producers})
    head = f"only {' and '.join(names)} add{'s' if len(names) == 1 else ''} {atom.predicate}"
    if atom.predicate in seen:  # a cycle: what adds it needs it already
        return f"{shown}, which the initial state holds{nowhere or ' not'} and {head[0].lower()}{head[1:]}, from itself"
    if depth >= MAX_DEPTH:
        return head
    seen = seen | {atom.predicate}
    clauses = []
    for rule, add in producers:
        binding = _unify(add, atom, env)
        if binding is None:
            continue
        missing = next((need for need in rule.needs if not _matches(need, binding, reached)), None)
        if missing is None:
            continue
        shown_binding = " ".join(f"{k}={v}" for k, v in binding.items() if k in {p.name for p in rule.parameters})
        need = _show(Atom(missing.predicate, tuple(binding.get(a, a) for a in missing.args)))
        rest = _why(missing, binding, rules, reached, seen, depth + 1)
        rest = rest if rest.startswith(need) else f"{need}; {rest}"
        clauses.append(f"{rule.name}{' ' + shown_binding if shown_binding else ''} needs {rest}")
    if not clauses:
        return head
    return f"{head}, and " + "; ".join(clauses)


def _unify(pattern: Atom, target: Atom, env: dict[str, str]) -> dict[str, str] | None:
    """Bindings of `pattern`'s variables that make it `target` (whose own variables, bound by `env` or free,
    stay free), or None when a constant differs."""
    binding: dict[str, str] = {}
    for p, t in zip(pattern.args, target.args):
        value = env.get(t, t)
        if value.startswith("?"):
            continue
        if p.startswith("?"):
            if binding.setdefault(p, value) != value:
                return None
        elif p != value:
            return None
    return binding
