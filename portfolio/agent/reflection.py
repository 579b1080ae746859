"""Reflection around a step through the project's OpenAI-compatible client: a pre-step critic that may veto a
side-effecting step, and a post-step critic that may declare an executed step failed.

    reflection = LLMReflection(LLMClient("http://localhost:8000/v1", "qwen"), pre_budget_s=5, post_budget_s=5)
    Agent(actions, reflection=reflection)

Off by default (an agent without `reflection` makes no call). Each critic asks for JSON-schema output
(`{"veto": bool, "reason": str}` before, `{"failed": bool, "reason": str}` after) and re-validates the answer
with pydantic, since some servers ignore the schema. Each critic has its own budget of LLM seconds over the
life of the reflection object, and every call gets at most `call_timeout_s` of what is left; once a budget is
spent that critic is skipped. A critic that errs or answers nonsense lets the step go ahead (fails open): a
broken critic must not stop the agent, and what went wrong is kept in `problems` and logged as an event.

The loop (`portfolio.agent.loop`) asks the pre-step critic only about side-effecting steps; a veto excludes the
step and replans with the reason as a critique (trigger `veto`); a post-step failure is a knowledge failure
(the step is excluded, the plan refined) recorded with the critic's reason. Under `Agent.arun` both run in
worker threads, so a slow model does not hold up the event loop.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from portfolio.agent.observability import emit
from portfolio.delegates.llm_client import LLMClient, LLMError, extract_json

PRE_SCHEMA = {
    "type": "object",
    "properties": {"veto": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["veto", "reason"],
    "additionalProperties": False,
}
POST_SCHEMA = {
    "type": "object",
    "properties": {"failed": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["failed", "reason"],
    "additionalProperties": False,
}
PRE_PROMPT = (
    "You review one step of an agent's plan before it runs. The step changes the world (it has side effects). "
    "Veto it only if running it now would be wrong or harmful given the state and the rest of the plan; say "
    'why in one sentence. Answer JSON {"veto": bool, "reason": str}.'
)
POST_PROMPT = (
    "You review one step of an agent's plan after it ran. Compare the effects the planner expected with the "
    "effects observed and the step's output. Declare the step failed only if it did not do what it was for; say "
    'why in one sentence. Answer JSON {"failed": bool, "reason": str}.'
)


class _PreVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")
    veto: bool
    reason: str = ""


class _PostVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")
    failed: bool
    reason: str = ""


def _short(value: Any, limit: int = 500) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LLMReflection:
    """The pre- and post-step critics (module docstring). `pre`/`post` switch each one on; budgets are LLM
    seconds per critic; `goal` is a sentence of context for both."""

    def __init__(
        self,
        client: LLMClient,
        *,
        pre: bool = True,
        post: bool = True,
        pre_budget_s: float = 10.0,
        post_budget_s: float = 10.0,
        call_timeout_s: float = 5.0,
        goal: str = "",
    ) -> None:
        if min(pre_budget_s, post_budget_s) < 0 or call_timeout_s <= 0:
            raise ValueError("reflection budgets must be >= 0 seconds and call_timeout_s > 0")
        self.client, self.pre, self.post, self.goal = client, pre, post, goal
        self.budget_s = {"pre": pre_budget_s, "post": post_budget_s}
        self.spent_s = {"pre": 0.0, "post": 0.0}
        self.calls = {"pre": 0, "post": 0}
        self.call_timeout_s = call_timeout_s
        self.problems: list[str] = []
        self._lock = threading.Lock()  # concurrent runs may share one reflection

    def before(self, step: str, state: list[str], plan: list[str]) -> str | None:
        """A reason to veto `step` (about to run from `state`, followed by `plan`), or None."""
        if not self.pre:
            return None
        facts = {"goal": self.goal, "step": step, "state": state, "plan": plan}
        verdict = self._ask("pre", PRE_PROMPT, facts, PRE_SCHEMA, _PreVerdict)
        return (verdict.reason.strip() or "no reason given") if verdict is not None and verdict.veto else None

    def after(self, step: str, expected: list[str], observed: list[str], output: Any) -> str | None:
        """A reason to declare the executed `step` failed, or None."""
        if not self.post:
            return None
        facts = {
            "goal": self.goal,
            "step": step,
            "expected_effects": expected,
            "observed_effects": observed,
            "output": _short(output),
        }
        verdict = self._ask("post", POST_PROMPT, facts, POST_SCHEMA, _PostVerdict)
        return (verdict.reason.strip() or "no reason given") if verdict is not None and verdict.failed else None

    def _ask(self, critic: str, prompt: str, facts: dict, schema: dict, model: type[BaseModel]) -> Any:
        with self._lock:
            left = self.budget_s[critic] - self.spent_s[critic]
        if left <= 0:
            emit("reflection", critic=critic, skipped="budget spent")
            return None
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": json.dumps(facts)}]
        started = time.monotonic()
        try:
            reply = self.client.chat(
                messages, f"{critic}_step_critic", schema, started + min(left, self.call_timeout_s)
            )
            verdict = model.model_validate(extract_json(reply.content))
        except (LLMError, ValueError, ValidationError) as error:
            kind = getattr(error, "kind", type(error).__name__)
            problem = f"{critic}-step critic on {facts['step']}: {kind}: {str(error)[:200]}"
            with self._lock:
                self.problems.append(problem)
            emit("reflection", critic=critic, step=facts["step"], problem=problem)
            verdict = None
        finally:
            with self._lock:
                self.spent_s[critic] += time.monotonic() - started
                self.calls[critic] += 1
        if verdict is not None:
            emit("reflection", critic=critic, step=facts["step"], verdict=verdict.model_dump_json())
        return verdict


__all__ = ["LLMReflection", "POST_SCHEMA", "PRE_SCHEMA"]
