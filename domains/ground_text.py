"""Grounded actions as text: one parser and one printer for every place that compares actions by name.

Actions arrive as text from many sides: `"(pick-up a)"` from the planners and the CLI, `"pick-up a"` from an HTTP
client, `"(PICK-UP  A)"` from a hand-written file, `"pick-up a"` as pyperplan and Fast Downward name operators.
Excluded actions, learned costs and critiques are matched by that text, so two spellings of one action must give
one string: the normal form is the PDDL form, lower-cased (PDDL names are case-insensitive), single-spaced,
in one pair of parentheses, which is also what `str(GroundAction)` prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from domains.errors import PDDLSyntaxError
from domains.model import GroundAction


def parse_ground_action(text: str) -> GroundAction:
    """`"(pick-up a)"`, `"pick-up a"` or `"( PICK-UP a )"` -> GroundAction("pick-up", ("a",)).
    `PDDLSyntaxError` (a `TaskInputError`, so a ValueError: bad input, exit code 2, HTTP 400) for an empty
    action or nested parentheses."""
    return _parse(text) if isinstance(text, str) else _parse(str(text))


# Every call with learned costs parses each grounded operator's name (80-1,000 of them) and a runtime's tasks
# share them: memoised, a detours plan's cost computation went from 0.6 to 0.3 ms. GroundAction is frozen.
@lru_cache(maxsize=65_536)
def _parse(text: str) -> GroundAction:
    inner = text.strip()
    if inner.startswith("(") and inner.endswith(")"):
        inner = inner[1:-1]
    parts = inner.lower().split()
    if not parts:
        raise PDDLSyntaxError(f"empty action {text!r}; expected a grounded action like (pick-up a)")
    if any("(" in part or ")" in part for part in parts):
        raise PDDLSyntaxError(f"{text!r} is not a grounded action like (pick-up a)")
    return GroundAction(parts[0], tuple(parts[1:]))


def ground_action_text(action: GroundAction | str) -> str:
    """The normal form of an action given as a `GroundAction` or in any accepted spelling: `"(pick-up a)"`."""
    if isinstance(action, GroundAction):
        return str(GroundAction(action.name.lower(), tuple(arg.lower() for arg in action.args)))
    return str(parse_ground_action(action))


def normalise_actions(actions: Iterable[GroundAction | str]) -> frozenset[str]:
    """A set of actions in normal form (excluded actions)."""
    return frozenset(ground_action_text(action) for action in actions)


def normalise_keys(values: dict[str, float]) -> dict[str, float]:
    """A mapping keyed by actions (learned costs), re-keyed by normal form."""
    return {ground_action_text(name): value for name, value in values.items()}
