"""How the agent's loop carries out one step: typed Python actions against a blackboard (`_TypedExecutor`), or
handlers bound to a PDDL task's action names (`_TaskExecutor`); each observes what happened as an `Observation`
for `portfolio.agent.loop`. Coroutine actions are awaited under their timeout (`_awaited`), or run to
completion from synchronous code (`_called`). Used by `portfolio.agent.runtime.Agent` and the adapters' sessions.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from domains.model import Atom, GroundAction, State
from domains.typed_actions import TypedAction, fact, named_fact, parse_literal, type_name
from portfolio.agent.failures import KnowledgeFailure, TransientFailure
from portfolio.agent.loop_types import Observation


def _with(state: State, literals: Iterable[str]) -> State:
    adds: set[Atom] = set()
    deletes: set[Atom] = set()
    for text in literals:
        atom, negated = parse_literal(text)
        (deletes if negated else adds).add(atom)
    return frozenset((set(state) - deletes) | adds)


async def _awaited(fn: Callable[..., Any], args: tuple, kwargs: dict, timeout: float | None, what: str) -> Any:
    """Await a coroutine function under `timeout` (its expiry cancels it: a transient failure); run a plain
    function in a worker thread, so that it does not hold up the other agents on the event loop."""
    if not inspect.iscoroutinefunction(fn):
        return await asyncio.to_thread(fn, *args, **kwargs)
    if timeout is None:
        return await fn(*args, **kwargs)
    timer = asyncio.timeout(timeout)
    try:
        async with timer:
            return await fn(*args, **kwargs)
    except TimeoutError:
        if timer.expired():  # our deadline cancelled it, rather than a TimeoutError of its own
            raise TransientFailure(f"{what} timed out after {timeout:g} s (cancelled)") from None
        raise


def _called(fn: Callable[..., Any], args: tuple, kwargs: dict, timeout: float | None, what: str) -> Any:
    """Call `fn` from synchronous code; a coroutine function runs to completion in its own event loop."""
    if not inspect.iscoroutinefunction(fn):
        return fn(*args, **kwargs)
    return asyncio.run(_awaited(fn, args, kwargs, timeout, what))


class _TypedExecutor:
    """Runs typed actions against a blackboard (type name -> latest object of that type; binding name -> object
    for the known `names`)."""

    def __init__(
        self,
        actions: Mapping[str, TypedAction],
        types: Mapping[str, Any],
        board: dict[str, Any],
        names: frozenset[str] = frozenset(),
    ):
        self.actions, self.types, self.board, self.names = actions, types, board, names
        self.named: dict[str, Any] = {}

    def hint(self, step: GroundAction) -> str:
        return self.actions[step.name].hint

    def side_effects(self, step: GroundAction) -> bool:
        return self.actions[step.name].side_effects

    def put(self, value: Any, name: str | None = None) -> set[Atom]:
        """Put `value` on the board under every registered type it is an instance of (and under `name`); the
        facts made true."""
        facts = set()
        if name is not None:
            self.named[name] = value
        for key, cls in self.types.items():
            if isinstance(cls, type) and isinstance(value, cls):
                self.board[key] = value
                facts.add(fact(key))
                if name is not None:
                    facts.add(named_fact(name, cls))
        return facts

    def put_inputs(self, inputs: Sequence[Any], named: Mapping[str, Any]) -> set[Atom]:
        """Put `inputs` on the board by type and `named` ones also by name; the facts made true."""
        facts: set[Atom] = set()
        for name, value in [(None, v) for v in inputs] + list(named.items()):
            made = self.put(value, name)
            if not made:
                raise ValueError(
                    f"input {(name + '=') if name else ''}{value!r}: no action takes a "
                    f"{type(value).__name__} (known types: {', '.join(sorted(self.types))})"
                )
            facts |= made
        return facts

    def arguments(self, spec: TypedAction) -> dict[str, Any]:
        return {
            param: self.named[param] if param in self.names else self.board[type_name(t)] for param, t in spec.inputs
        }

    def observe(self, spec: TypedAction, output: Any, state: State) -> Observation:
        values = output if len(spec.outputs) > 1 and isinstance(output, tuple) else (output,)
        names = spec.output_names or (None,) * len(spec.outputs)
        produced: set[Atom] = set()
        for cls, name, value in zip(spec.outputs, names, values):
            if value is None:
                continue  # produced nothing: the expected effect is not observed (see divergence)
            if not isinstance(value, cls):
                raise KnowledgeFailure(f"{spec.name} returned {type(value).__name__}, expected {cls.__name__}")
            produced |= self.put(value, name)
        _, adds, deletes = spec.conditions(self.names)
        observed = frozenset((set(state) | produced | set(adds)) - (set(deletes) - set(adds)))
        ask = spec.replan_when is not None and bool(spec.replan_when(output))
        return Observation(observed, output, spec.replan_reason if ask else None)

    def execute(self, step: GroundAction, state: State, expected: State) -> Observation:
        spec = self.actions[step.name]
        output = _called(spec.fn, (), self.arguments(spec), spec.timeout, str(step))
        return self.observe(spec, output, state)

    async def aexecute(self, step: GroundAction, state: State, expected: State) -> Observation:
        spec = self.actions[step.name]
        output = await _awaited(spec.fn, (), self.arguments(spec), spec.timeout, str(step))
        return self.observe(spec, output, state)

    def apply_updates(self, state: State, updates: Any) -> State:
        if updates is None:
            return state
        if isinstance(updates, Mapping):
            current = set(state)
            for key, value in updates.items():
                if isinstance(key, str) and key in self.names:  # a binding name
                    old = self.named.pop(key, None)
                    current -= {
                        named_fact(key, cls)
                        for cls in self.types.values()
                        if isinstance(cls, type) and isinstance(old, cls)
                    }
                    if value is not None:
                        current |= self.put(value, key)
                    continue
                name = type_name(key)
                if value is None:
                    self.board.pop(name, None)
                    current.discard(fact(name))
                else:
                    self.board[name] = value
                    current.add(fact(name))
            return frozenset(current)
        return _with(state, updates)


class _TaskExecutor:
    """Runs PDDL actions through handlers `fn(*args)`; a handler returns None (its effects happened as
    modelled) or the literals it observed, e.g. ["(has-notes j1)"] (expected effects missing from them count
    as divergence)."""

    def __init__(
        self, handlers: Mapping[str, Callable[..., Any]], hints: Mapping[str, str], side_effects: Iterable[str]
    ) -> None:
        self.handlers, self.hints, self.effects = handlers, hints, set(side_effects)

    def hint(self, step: GroundAction) -> str:
        return self.hints.get(step.name, "conditional")

    def side_effects(self, step: GroundAction) -> bool:
        return step.name in self.effects

    def observe(self, answer: Any, state: State, expected: State) -> Observation:
        return Observation(expected, None) if answer is None else Observation(_with(state, answer), answer)

    def execute(self, step: GroundAction, state: State, expected: State) -> Observation:
        answer = _called(self.handlers[step.name], step.args, {}, None, str(step))
        return self.observe(answer, state, expected)

    async def aexecute(self, step: GroundAction, state: State, expected: State) -> Observation:
        answer = await _awaited(self.handlers[step.name], step.args, {}, None, str(step))
        return self.observe(answer, state, expected)

    def apply_updates(self, state: State, updates: Any) -> State:
        return state if updates is None else _with(state, updates)
