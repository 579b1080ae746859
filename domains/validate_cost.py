"""What checking a plan costs, worked out from the task before a step of it is checked (`validation_cost`).

The validator (`domains.validate`) evaluates a quantified condition by enumerating its variables' objects:
`(forall (?x1 ... ?x7 - obj) (not (p ?x1)))` over 50 objects is 50^7 = 7.8e11 bindings, each a condition
checked, in every state the action is tried in; a quantified effect builds one ground atom per binding. None of
that depends on the state for the worst case, so it can be counted from the task and the plan alone: the
objects of each variable's type (subtypes and `either` unions included, as the validator reads them), the
nesting of the quantifiers, and how many steps of the plan use each action. A service that checks plans under a
deadline (`portfolio.serve.validator`) refuses at once what cannot finish, instead of working until the deadline.

The count is the worst case: a `forall` that fails on its first binding stops there, an `exists` that finds a
witness too. With derived predicates the validator evaluates quantifiers as joins on an indexed state
(`domains.joins`): there only the variables no positive atom of the body binds are enumerated, and only those are
counted (the others cost what the state holds, which the plan does not tell).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domains.joins import conjuncts, negate
from domains.model import And, Atom, Equals, Exists, Formula, GroundAction, Imply, Not, Or, Parameter, Task
from domains.validate_compile import _compiled


@dataclass(frozen=True)
class Quantifier:
    """One quantified condition or effect: where it is, its variables, their objects' counts and how many
    conditions it checks (or atoms it builds) over the whole plan."""

    where: str  # "the precondition of go"
    kind: str  # forall, exists or "a forall effect"
    parameters: tuple[Parameter, ...]
    sizes: tuple[int, ...]  # objects per enumerated variable
    total: int

    def describe(self) -> str:
        """`forall (?x1 ?x2 - obj) in the precondition of go: 50^2 = 2,500 bindings` (`...: 50 bindings` for one
        variable)."""
        runs: list[tuple[list[str], str]] = []  # variables of one type together: (?x1 ?x2 - obj ?y - loc)
        for p in self.parameters:
            if runs and runs[-1][1] == p.type:
                runs[-1][0].append(p.name)
            else:
                runs.append(([p.name], p.type))
        names = " ".join(f"{' '.join(run)} - {type_name}" for run, type_name in runs)
        bindings = f"{count(math.prod(self.sizes))} bindings"
        if len(self.sizes) > 1:
            same = len(set(self.sizes)) == 1
            product = f"{self.sizes[0]}^{len(self.sizes)}" if same else " x ".join(str(s) for s in self.sizes)
            bindings = f"{product} = {bindings}"
        return f"{self.kind} ({names}) in {self.where}: {bindings}"


@dataclass(frozen=True)
class ValidationCost:
    """The worst case of checking a plan: `conditions` evaluated over the whole plan, the most ground `atoms`
    one step's quantified effects build, and the quantifier that costs most (None without quantifiers)."""

    conditions: int
    atoms: int
    largest: Quantifier | None


def count(number: float) -> str:
    """A count as people read it: `7.8e11` when large, `2,500` otherwise."""
    if number < 1e7:
        return f"{int(number):,}"
    mantissa, exponent = f"{number:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def validation_cost(task: Task, plan: Sequence[GroundAction]) -> ValidationCost:
    """The worst-case cost of `domains.validate.validate_plan(task, plan)`: every step of the plan tried (its
    precondition and its effects, the derived predicates recomputed in its state), then the goal."""
    compiled = _compiled(task)  # the validator's own reading of the types; cached for the check that follows
    sizes = {name: len(compiled.of_type(name)) for name in {*compiled.members}}

    def size(type_name: str) -> int:
        if type_name not in sizes:
            sizes[type_name] = len(compiled.of_type(type_name))
        return sizes[type_name]

    joined = bool(task.domain.axioms)
    found: list[Quantifier] = []
    uses = Counter(action.name for action in plan)
    conditions, atoms = 0, 0
    for schema in task.domain.actions:
        times = uses.get(schema.name, 0)
        if not times:
            continue
        where = f"the precondition of {schema.name}"
        step = _cost(schema.precondition, size, joined, where, times, found)
        for effect in schema.effects:
            if not effect.parameters:
                step += _cost(effect.condition, size, joined, f"an effect of {schema.name}", times, found)
                continue
            widths = tuple(size(p.type) for p in effect.parameters)
            bindings = math.prod(widths)
            at = len(found)
            inner = _cost(effect.condition, size, joined, f"an effect of {schema.name}", times * bindings, found)
            step += bindings * inner  # the condition tested for each binding (an atom built for each)
            atoms = max(atoms, bindings)
            found.insert(
                at,
                Quantifier(
                    f"an effect of {schema.name}",
                    "a forall effect",
                    effect.parameters,
                    widths,
                    times * bindings * inner,
                ),
            )
        conditions += times * step
    states = len(plan) + 1
    for axiom in task.domain.axioms:
        where = f"the rule of the derived predicate {axiom.head.predicate}"
        conditions += _quantified(axiom.parameters, axiom.body, True, size, joined, where, states, found, "exists")
    conditions += 2 * _cost(task.problem.goal, size, joined, "the goal", 2, found)  # checked, then diagnosed
    return ValidationCost(conditions, atoms, max(found, key=lambda q: q.total, default=None))


def _cost(
    formula: Formula, size: Callable[[str], int], joined: bool, where: str, times: int, found: list[Quantifier]
) -> int:
    """Conditions checked, at most, in one evaluation of `formula`; each quantifier met is noted in `found`
    with what it costs over `times` evaluations."""
    if isinstance(formula, (Atom, Equals)):
        return 1
    if isinstance(formula, Not):
        return _cost(formula.arg, size, joined, where, times, found)
    if isinstance(formula, (And, Or)):
        return max(1, sum(_cost(part, size, joined, where, times, found) for part in formula.parts))
    if isinstance(formula, Imply):
        return _cost(formula.condition, size, joined, where, times, found) + _cost(
            formula.consequence, size, joined, where, times, found
        )
    want = isinstance(formula, Exists)
    kind = "exists" if want else "forall"
    return _quantified(formula.parameters, formula.body, want, size, joined, where, times, found, kind)


def _quantified(
    parameters: tuple[Parameter, ...],
    body: Formula,
    want: bool,
    size: Callable[[str], int],
    joined: bool,
    where: str,
    times: int,
    found: list[Quantifier],
    kind: str,
) -> int:
    """Conditions one evaluation of a quantifier checks: its enumerated variables' bindings times its body's
    cost. Enumerated: every variable; in a join (`joined`), those no positive atom of the body binds."""
    enumerated = parameters
    if joined:
        params, parts = conjuncts(parameters, body if want else negate(body))
        bound = {a for part in parts if isinstance(part, Atom) for a in part.args}
        enumerated = tuple(p for p in params if p.name not in bound)
    widths = tuple(size(p.type) for p in enumerated)
    bindings = math.prod(widths)
    at = len(found)  # before the quantifiers inside it: the largest reported of a nest, on a tie, is the outer one
    inner = _cost(body, size, joined, where, times * bindings, found)
    if enumerated:
        found.insert(at, Quantifier(where, kind, enumerated, widths, times * bindings * inner))
    return bindings * inner
