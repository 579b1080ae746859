"""The LLM delegate: an LLM proposes, the validator disposes (LLM-Modulo).

Two modes, in order, each with a bounded number of repair rounds:

- **subgoals**: the LLM orders the goal into subgoals (`{"subgoals": [["(on a b)"], ["(on b c)", "(clear a)"]]}`);
  the classical planners solve each from the state the previous one reached (`decompose.SubgoalSolver`), the
  task's own goal last, and the concatenation is validated against the task.
- **plan**: the LLM proposes the grounded actions (`{"plan": ["(pick-up a)", "(stack a b)"]}`), which are
  simulated step by step.

Whatever is wrong (not JSON, wrong shape, unknown predicate/action/object, wrong arity, precondition not satisfied at
step k with the failing atoms, goal not reached with the missing atoms, subgoal unreachable) goes back to the LLM as
a critique for the next round. Only validated plans leave this module. Endpoint failures (down, 4xx/5xx, time-out,
rate limit beyond the budget) end the attempt at once with the reason, so the cascade moves on.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from domains.ground_text import parse_ground_action
from domains.literals import parse_ground_literal as parse_literal
from domains.model import Plan, Task
from domains.pddl_writer import formula_to_pddl
from domains.validate import validate_plan
from portfolio.delegates.decompose import SubgoalSolver, conjunction, relevant_facts
from portfolio.delegates.llm_client import LLMClient, LLMError, extract_json
from portfolio.engine import cancel
from portfolio.engine.results import Delegate, DelegateOutcome, PlanRequest, Status
from traces.attempt_details import AttemptDetails

log = logging.getLogger(__name__)

SUBGOALS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"subgoals": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}},
    "required": ["subgoals"],
    "additionalProperties": False,
}
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"plan": {"type": "array", "items": {"type": "string"}}},
    "required": ["plan"],
    "additionalProperties": False,
}
MAX_PLAN_STEPS = 2000

SYSTEM = (
    "You are a careful automated-planning assistant. You answer with one JSON object that follows the given "
    'schema and nothing else. Atoms and actions are written in PDDL form, e.g. "(on a b)", "(pick-up a)".'
)
INSTRUCTIONS = {
    "subgoals": (
        "Decompose the goal into an ordered list of subgoals, each a conjunction of ground atoms of the "
        "domain's predicates (goal atoms or intermediate conditions), such that achieving them one after "
        "another, keeping what must be kept, reaches the goal. A classical planner will solve each subgoal "
        'from the state the previous one reached. Answer {"subgoals": [["(atom ...)", ...], ...]}.'
    ),
    "plan": (
        "Give a complete sequential plan from the current state to the goal: grounded actions of the domain "
        'with objects of the problem, in order. Answer {"plan": ["(action arg ...)", ...]}.'
    ),
}


@dataclass
class _Round:
    plan: Plan | None
    critique: str


class LLMDelegate(Delegate):
    """Decomposer-tier delegate backed by an OpenAI-compatible chat endpoint.

    `repair_rounds` bounds the critique-and-retry rounds per mode; `subgoal_share` is the part of the budget the
    subgoal mode may use before the plan mode starts; `solver` plans subgoals (shared with the goal agenda).
    """

    source = "llm"
    share = 2.0  # of the decomposer tier's budget, the goal agenda's 1 (`portfolio.delegates.registry`)

    def __init__(
        self,
        client: LLMClient,
        solver: SubgoalSolver | None = None,
        repair_rounds: int = 3,
        modes: tuple[str, ...] = ("subgoals", "plan"),
        subgoal_share: float = 0.6,
        budget_s: float | None = None,
        name: str = "llm",
    ) -> None:
        for mode in modes:
            if mode not in INSTRUCTIONS:
                raise ValueError(f"unknown LLM mode {mode!r}; known: {', '.join(INSTRUCTIONS)}")
        self.name = name
        self.budget_s = budget_s
        self.client = client
        self.solver = solver or SubgoalSolver()
        self.repair_rounds = repair_rounds
        self.modes = modes
        self.subgoal_share = subgoal_share

    def supports(self, task: Task) -> bool:
        return True

    def warm_up(self) -> None:
        self.solver.warm_up()

    def close(self) -> None:
        self.client.close()
        self.solver.close()

    # -- the loop -----------------------------------------------------------------------------------------
    def solve(self, request: PlanRequest, deadline: float) -> DelegateOutcome:
        details: AttemptDetails = {
            "llm_calls": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "repair_rounds": 0,
            "critiques": [],
        }
        last = "no answer"
        for position, mode in enumerate(self.modes):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or cancel.stopped():
                return DelegateOutcome(Status.TIMEOUT, reason=f"budget used up; last critique: {last}", details=details)
            share = self.subgoal_share if mode == "subgoals" and position < len(self.modes) - 1 else 1.0
            mode_deadline = time.monotonic() + share * remaining
            try:
                plan, last = self._mode(mode, request, mode_deadline, details)
            except LLMError as error:
                details["llm_error"] = error.kind
                status = Status.TIMEOUT if error.kind == "timeout" else Status.ERROR
                return DelegateOutcome(status, reason=f"LLM endpoint ({error.kind}): {error}", details=details)
            if plan is not None:
                details["mode"] = mode
                return DelegateOutcome(Status.SOLVED, plan=plan, details=details)
        status = Status.TIMEOUT if time.monotonic() >= deadline else Status.ERROR
        return DelegateOutcome(status, reason=f"no valid plan from the LLM; last critique: {last}", details=details)

    def _mode(
        self, mode: str, request: PlanRequest, deadline: float, details: AttemptDetails
    ) -> tuple[Plan | None, str]:
        """Ask, check, critique, ask again: (a validated plan or None, the last critique)."""
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(request, mode)}]
        schema = SUBGOALS_SCHEMA if mode == "subgoals" else PLAN_SCHEMA
        critique = "no answer"
        for round_number in range(self.repair_rounds + 1):
            if cancel.expired(deadline):  # also when the cascade has its plan from elsewhere
                break
            if round_number:
                details["repair_rounds"] += 1
            reply = self.client.chat(messages, mode, schema, deadline)
            details["llm_calls"] += 1
            details["prompt_tokens"] += reply.prompt_tokens
            details["completion_tokens"] += reply.completion_tokens
            details["total_tokens"] += reply.total_tokens
            checked = self._check(mode, request, reply.content, deadline)
            if checked.plan is not None:
                return checked.plan, ""
            critique = checked.critique
            details["critiques"].append(f"{mode} round {round_number + 1}: {critique}")
            log.info("LLM %s answer rejected: %s", mode, critique)
            messages.append({"role": "assistant", "content": reply.content})
            messages.append({"role": "user", "content": repair_prompt(critique, mode)})
        return None, critique

    def _check(self, mode: str, request: PlanRequest, content: str, deadline: float) -> _Round:
        if mode == "plan":
            return check_plan_answer(request, content)
        try:
            subgoals = parse_subgoals_answer(request.task, content)
        except ValueError as error:
            return _Round(None, str(error))
        goal = request.task.problem.goal
        if not subgoals or subgoals[-1] != goal:
            subgoals.append(goal)  # the last subgoal is always the goal itself: the plan must reach it
        translation, _ = self.solver.translation(request, deadline)
        result = self.solver.solve_sequence(request, subgoals, deadline, translation)
        if result.plan is not None:
            return _Round(result.plan, "")
        return _Round(None, result.critique)


# ---------------------------------------------------------------------------------------------------------
# Prompts and answers (pure functions)


def prompt(request: PlanRequest, mode: str) -> str:
    """Domain, current state (as the problem's init), goal, earlier critiques, and what to answer."""
    task = request.effective_task()
    parts = [
        "Domain (PDDL):",
        task.domain_pddl.strip(),
        "",
        "Problem (PDDL; its :init is the current state):",
        task.problem_pddl.strip(),
        "",
        f"Goal: {formula_to_pddl(task.problem.goal)}",
    ]
    if request.critiques:
        parts += ["", "Earlier attempts failed for these reasons; avoid them:", *(f"- {c}" for c in request.critiques)]
    if request.excluded:
        parts += ["", "These grounded actions must not be used: " + " ".join(sorted(request.excluded))]
    parts += ["", INSTRUCTIONS[mode]]
    return "\n".join(parts)


def repair_prompt(critique: str, mode: str) -> str:
    return (
        f"That answer does not work: {critique}\n"
        f"Fix it and answer again with the complete JSON object ({'subgoals' if mode == 'subgoals' else 'plan'})."
    )


def _answer_list(content: str, key: str, example: str) -> list:
    try:
        data = extract_json(content)
    except ValueError as error:
        raise ValueError(f"{error}; answer with a JSON object like {example}") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise ValueError(f'the answer must be a JSON object with a list under "{key}", like {example}')
    return data[key]


def parse_subgoals_answer(task: Task, content: str) -> list:
    """The subgoals of an answer as formulas (conjunctions of literals); ValueError with a critique."""
    example = '{"subgoals": [["(on a b)"], ["(on b c)", "(clear a)"]]}'
    raw = _answer_list(content, "subgoals", example)
    subgoals = []
    for number, group in enumerate(raw, start=1):
        if isinstance(group, str):
            group = [group]
        if not isinstance(group, list) or not group or not all(isinstance(a, str) for a in group):
            raise ValueError(f'subgoal {number} must be a non-empty list of atoms like ["(on a b)"]')
        try:
            subgoals.append(conjunction([parse_literal(task, atom) for atom in group]))
        except ValueError as error:
            raise ValueError(f"subgoal {number}: {error}") from None
    if not subgoals:
        raise ValueError("the answer has no subgoals")
    return subgoals


def check_plan_answer(request: PlanRequest, content: str) -> _Round:
    """Parse and simulate a plan answer: the plan when valid, else the critique (step, action, failing atoms)."""
    try:
        raw = _answer_list(content, "plan", '{"plan": ["(pick-up a)", "(stack a b)"]}')
        if not all(isinstance(step, str) for step in raw):
            raise ValueError('every plan step must be a string like "(pick-up a)"')
        if len(raw) > MAX_PLAN_STEPS:
            raise ValueError(f"the plan has {len(raw)} steps; at most {MAX_PLAN_STEPS} are accepted")
        plan = [parse_ground_action(step) for step in raw]
    except ValueError as error:
        return _Round(None, str(error))
    task = request.task
    validation = validate_plan(task, plan, init=request.initial_state)
    if not validation.ok:
        critique = validation.message
        if validation.problem == "precondition" and validation.failed_step is not None:
            action = plan[validation.failed_step - 1]
            before = validate_plan(task, plan[: validation.failed_step - 1], init=request.initial_state).final_state
            facts = relevant_facts(before, action)
            critique += f". Facts about its arguments before step {validation.failed_step}: " + (
                " ".join(facts) if facts else "none"
            )
        return _Round(None, critique)
    banned = [str(step) for step in plan if request.is_excluded(step)]
    if banned:
        return _Round(None, f"the plan uses {banned[0]}, which must not be used")
    return _Round(plan, "")
