"""Reflection through the real LLM client against the scripted OpenAI-protocol server: the pre-step critic vetoes a
side-effecting step (replan, reason in the critiques), the post-step critic declares a step failed, each under its
own budget, off by default, failing open when the model errs."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from fake_openai import FakeOpenAI, Reply, answer

from domains.typed_actions import action
from portfolio.agent import Agent
from portfolio.agent.reflection import LLMReflection
from portfolio.delegates.llm_client import LLMClient


@dataclass
class Draft:
    text: str


@dataclass
class Sent:
    via: str


@action(cost=1.0, side_effects=True)
def email_everyone(d: Draft) -> Sent:
    return Sent("all-staff list")


@action(cost=3.0, side_effects=True)
def email_team(d: Draft) -> Sent:
    return Sent("team list")


def reflection(server: FakeOpenAI, **options) -> LLMReflection:
    return LLMReflection(LLMClient(server.url, "critic"), goal="announce the release", **options)


def test_pre_step_critic_vetoes_and_the_agent_replans_around_the_step():
    replies = [
        answer({"veto": True, "reason": "an all-staff mail about a team release is spam"}),
        answer({"veto": False, "reason": ""}),
    ]
    with FakeOpenAI(replies) as server:
        critics = reflection(server, post=False)
        with Agent([email_everyone, email_team], goal=Sent, reflection=critics, warm=False) as agent:
            result = agent.run(Draft("v2 is out"))
        bodies = [r["body"] for r in server.requests]
    assert result.succeeded and result.output == Sent("team list")
    assert [s.action for s in result.steps] == ["(email-team)"]  # the vetoed step never ran
    (replan,) = result.replans
    assert replan.trigger == "veto" and "all-staff mail about a team release is spam" in replan.reason
    assert any("spam" in c for c in result.critiques) and "(email-everyone)" not in replan.plan
    assert bodies[0]["response_format"]["json_schema"]["name"] == "pre_step_critic"
    asked = json.loads(bodies[0]["messages"][1]["content"])
    assert asked["step"] == "(email-everyone)" and asked["goal"] == "announce the release"
    assert critics.calls == {"pre": 2, "post": 0}


def test_post_step_critic_declares_the_step_failed():
    replies = [answer({"failed": True, "reason": "the list bounced"}), answer({"failed": False, "reason": ""})]
    with FakeOpenAI(replies) as server:
        critics = reflection(server, pre=False)
        with Agent([email_everyone, email_team], goal=Sent, reflection=critics, warm=False) as agent:
            result = agent.run(Draft("v2 is out"))
        first = json.loads(server.requests[0]["body"]["messages"][1]["content"])
    assert result.succeeded and result.output == Sent("team list")
    assert [(s.action, s.outcome, s.category) for s in result.steps] == [
        ("(email-everyone)", "failure", "knowledge"),
        ("(email-team)", "success", None),
    ]
    assert "post-step critic: the list bounced" in result.steps[0].error
    assert first["expected_effects"] == ["(known-sent)"] and first["observed_effects"] == ["(known-sent)"]
    assert "all-staff list" in first["output"]


def test_critics_run_under_arun_too():
    with FakeOpenAI([answer({"veto": True, "reason": "spam"}), answer({"veto": False, "reason": ""})]) as server:

        async def main():
            with Agent(
                [email_everyone, email_team], goal=Sent, reflection=reflection(server, post=False), warm=False
            ) as agent:
                return await agent.arun(Draft("v2"))

        result = asyncio.run(main())
    assert result.output == Sent("team list") and [r.trigger for r in result.replans] == ["veto"]


def test_each_critic_has_its_own_budget():
    with FakeOpenAI([answer({"failed": False, "reason": ""})]) as server:
        critics = reflection(server, pre_budget_s=0.0, post_budget_s=30.0)
        with Agent([email_everyone], goal=Sent, reflection=critics, warm=False) as agent:
            assert agent.run(Draft("v2")).succeeded
        assert critics.calls == {"pre": 0, "post": 1} and len(server.requests) == 1


def test_a_failing_critic_lets_the_step_go_ahead_and_says_why():
    with FakeOpenAI([Reply(status=500, content="model crashed"), Reply(content="no idea")]) as server:
        client = LLMClient(server.url, "critic", max_retries=0)
        critics = LLMReflection(client, call_timeout_s=5.0)
        with Agent([email_everyone], goal=Sent, reflection=critics, warm=False) as agent:
            result = agent.run(Draft("v2"))
    assert result.succeeded and result.replans == []
    assert len(critics.problems) == 2
    assert "http-5xx" in critics.problems[0] and "not JSON" in critics.problems[1]


def test_reflection_is_off_by_default():
    with FakeOpenAI([answer({"veto": True, "reason": "no"})]) as server:
        with Agent([email_everyone], goal=Sent, warm=False) as agent:
            assert agent.run(Draft("v2")).succeeded
        assert server.requests == []
