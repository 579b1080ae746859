"""Fast Downward's SAS+ task text, taken apart just enough to re-use a translation.

Translation (parsing + grounding + invariant synthesis) is most of a warm planning call. Two things planning
agents do over and over need no new translation:

- **Replan from a changed state.** Relaxed reachability is monotone and idempotent: if every fact true in the new
  state was reachable from the old one, nothing reachable from the new state was pruned. So when every changed
  fact is one of the task's SAS values (and no variable gets two true values), we only rewrite `begin_state`.
  Otherwise `with_init` returns None and the caller translates again.
- **Other action costs, or actions taken away.** Operators are listed by grounded name: costs are rewritten in
  place (scaled to integers, as Fast Downward wants) and excluded operators dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from domains.model import Atom, GroundAction

COST_SCALE = 1000  # Fast Downward costs are integers: learned costs keep three decimals


@dataclass(frozen=True)
class SasOperator:
    name: str  # "pick-up b", as the translator writes it
    body: str  # prevail and effect lines, between the name and the cost
    cost: int


@dataclass(frozen=True)
class SasTask:
    head: str  # version, metric placeholder, variables, mutex groups
    values: tuple[tuple[str, ...], ...]  # per variable: "Atom on(a, b)", "NegatedAtom ...", "<none of those>"
    init: tuple[int, ...]
    goal: str
    operators: tuple[SasOperator, ...]
    tail: str  # axioms
    metric: bool

    @property
    def operator_names(self) -> list[str]:
        return [op.name for op in self.operators]

    def render(
        self,
        init: tuple[int, ...] | None = None,
        costs: dict[str, float] | None = None,
        excluded: frozenset[str] = frozenset(),
    ) -> str:
        """The SAS text, optionally from another initial state, with other costs (keyed by PDDL form
        `"(pick-up b)"`) and without excluded operators."""
        parts = [self.head.replace("@METRIC@", "1" if (self.metric or costs) else "0")]
        parts.append("begin_state\n" + "\n".join(map(str, init or self.init)) + "\nend_state\n")
        parts.append(self.goal)
        kept = [op for op in self.operators if not excluded or f"({op.name})" not in excluded]
        parts.append(f"{len(kept)}\n")
        for op in kept:
            cost = op.cost
            if costs:
                learned = costs.get(f"({op.name})")
                if learned is not None:
                    cost = max(0, round(learned * COST_SCALE))
                else:
                    cost = op.cost * COST_SCALE
            parts.append(f"begin_operator\n{op.name}\n{op.body}{cost}\nend_operator\n")
        parts.append(self.tail)
        return "".join(parts)

    def atom_index(self) -> dict[str, tuple[int, int]]:
        """`"on(a, b)"` -> (variable, value) for every positive atom the task represents."""
        index = {}
        for var, names in enumerate(self.values):
            for val, name in enumerate(names):
                if name.startswith("Atom "):
                    index[name[5:]] = (var, val)
        return index

    def with_init(self, old_init: frozenset[Atom], new_init: frozenset[Atom]) -> tuple[int, ...] | None:
        """SAS initial values for `new_init`, or None when the translation cannot represent it soundly."""
        index = self.atom_index()
        for atom in old_init ^ new_init:
            if sas_atom_name(atom) not in index:
                return None  # a static or pruned fact changed: the grounding may be wrong now
        true_names = {sas_atom_name(atom) for atom in new_init}
        values: list[int] = []
        for names in self.values:
            chosen = [val for val, name in enumerate(names) if name.startswith("Atom ") and name[5:] in true_names]
            if len(chosen) > 1:
                return None  # violates a mutex invariant of the old task
            if chosen:
                values.append(chosen[0])
                continue
            fallback = [val for val, name in enumerate(names) if not name.startswith("Atom ")]
            if len(fallback) != 1:
                return None
            values.append(fallback[0])
        return tuple(values)


def sas_atom_name(atom: Atom) -> str:
    return f"{atom.predicate}({', '.join(atom.args)})"


def operator_action(name: str) -> GroundAction:
    parts = name.split()
    return GroundAction(parts[0], tuple(parts[1:]))


def parse_sas(text: str) -> SasTask:
    """Split translator output into the parts `SasTask.render` rewrites."""
    lines = text.split("\n")
    position = 0

    def expect(token: str) -> None:
        nonlocal position
        if lines[position] != token:
            raise ValueError(f"SAS line {position + 1}: expected {token!r}, got {lines[position]!r}")
        position += 1

    expect("begin_version")
    position += 2  # version number, end_version
    expect("begin_metric")
    metric = lines[position] == "1"
    position += 2
    head_start = position
    variable_count = int(lines[position])
    position += 1
    values: list[tuple[str, ...]] = []
    for _ in range(variable_count):
        expect("begin_variable")
        position += 2  # name, axiom layer
        size = int(lines[position])
        position += 1
        values.append(tuple(lines[position : position + size]))
        position += size
        expect("end_variable")
    mutex_count = int(lines[position])
    position += 1
    for _ in range(mutex_count):
        expect("begin_mutex_group")
        size = int(lines[position])
        position += size + 2
    head = (
        "begin_version\n3\nend_version\nbegin_metric\n@METRIC@\nend_metric\n"
        + "\n".join(lines[head_start:position])
        + "\n"
    )
    expect("begin_state")
    init = tuple(int(lines[position + i]) for i in range(variable_count))
    position += variable_count
    expect("end_state")
    goal_start = position
    expect("begin_goal")
    goal_size = int(lines[position])
    position += goal_size + 1
    expect("end_goal")
    goal = "\n".join(lines[goal_start:position]) + "\n"
    operator_count = int(lines[position])
    position += 1
    operators = []
    for _ in range(operator_count):
        expect("begin_operator")
        name = lines[position].strip()
        body_start = position + 1
        end = lines.index("end_operator", body_start)
        body = "\n".join(lines[body_start : end - 1]) + "\n"
        operators.append(SasOperator(name, body, int(lines[end - 1])))
        position = end + 1
    tail = "\n".join(lines[position:])
    return SasTask(head, tuple(values), init, goal, tuple(operators), tail, metric)
