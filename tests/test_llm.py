"""The LLM delegate through its real HTTP client against a local scripted OpenAI-protocol server.

Scripted cases: a correct plan, plans and subgoals that need one repair round, garbage, schema-valid nonsense,
a 500, a 429 with Retry-After (honoured, and refused when it does not fit), a server that never answers (the
budget holds), an endpoint that is down, a server that rejects response_format. Every plan is validated.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from fake_openai import FakeOpenAI, Reply, answer
from support import IPC

from domains.load import load_task
from domains.validate import validate_plan
from portfolio.delegates.decompose import SubgoalSolver
from portfolio.delegates.llm import LLMDelegate
from portfolio.delegates.llm_client import LLMClient
from portfolio.delegates.registry import decomposer_tier, make_delegate
from portfolio.engine.cascade import PortfolioDecomposition
from portfolio.engine.results import PlanRequest, Status

KEY = "sk-test-SECRET-0123456789"
GOOD_PLAN = ["(pick-up b)", "(stack b a)", "(pick-up c)", "(stack c b)", "(pick-up d)", "(stack d c)"]
# (stack c b) at step 2: the hand holds b, not c, and b is not clear.
BAD_PLAN = ["(pick-up b)", "(stack c b)", "(pick-up d)"]


@pytest.fixture(scope="module")
def task():
    return load_task(IPC / "blocks" / "domain.pddl", IPC / "blocks" / "probBLOCKS-4-0.pddl")


@pytest.fixture(scope="module")
def solver():
    shared = SubgoalSolver(classical=("fast-downward",))
    shared.warm_up()
    yield shared
    shared.close()


def delegate(server: FakeOpenAI, solver: SubgoalSolver, modes=("plan",), **kwargs) -> LLMDelegate:
    client = LLMClient(server.url, "test-model", api_key=KEY, max_retries=kwargs.pop("max_retries", 2))
    made = LLMDelegate(client, solver=solver, modes=modes, **kwargs)
    made.close = client.close  # the module's solver outlives each delegate
    return made


def run(made: LLMDelegate, task, budget: float = 10.0):
    started = time.monotonic()
    outcome = made.solve(PlanRequest(task), time.monotonic() + budget)
    return outcome, time.monotonic() - started


def test_correct_plan_is_validated_and_accounted(task, solver, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeOpenAI([answer({"plan": GOOD_PLAN})]) as server:
        made = delegate(server, solver)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED
    assert validate_plan(task, outcome.plan).ok
    assert outcome.details["llm_calls"] == 1 and outcome.details["total_tokens"] == 120
    assert outcome.details["repair_rounds"] == 0 and outcome.details["critiques"] == []
    sent = server.requests[0]
    assert sent["headers"]["Authorization"] == f"Bearer {KEY}"
    assert sent["body"]["model"] == "test-model"
    response_format = sent["body"]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["required"] == ["plan"]
    prompt = sent["body"]["messages"][-1]["content"]
    assert "(:action stack" in prompt.lower() or "(:action stack" in prompt and "(on d c)" in prompt.lower()
    # The key went into the header and nowhere else we keep.
    assert KEY not in json.dumps(outcome.details) + outcome.reason + caplog.text + repr(made.client)
    assert KEY not in json.dumps(sent["body"])


def test_plan_with_precondition_error_is_repaired_in_one_round(task, solver):
    with FakeOpenAI([answer({"plan": BAD_PLAN}), answer({"plan": GOOD_PLAN})]) as server:
        made = delegate(server, solver)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
    assert outcome.details["llm_calls"] == 2 and outcome.details["repair_rounds"] == 1
    (critique,) = outcome.details["critiques"]
    assert "step 2 (stack c b)" in critique and "(holding c)" in critique and "(clear b)" in critique
    # The critique went back to the LLM, after its own wrong answer.
    repair = server.requests[1]["body"]["messages"]
    assert repair[-2]["role"] == "assistant" and json.loads(repair[-2]["content"]) == {"plan": BAD_PLAN}
    assert "(holding c)" in repair[-1]["content"]


def test_plan_that_misses_the_goal_names_the_missing_atoms(task, solver):
    with FakeOpenAI([answer({"plan": GOOD_PLAN[:4]}), answer({"plan": GOOD_PLAN})]) as server:
        made = delegate(server, solver)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED
    assert "goal not reached" in outcome.details["critiques"][0] and "(on d c)" in outcome.details["critiques"][0]


def test_subgoal_mode_plans_each_subgoal_classically(task, solver):
    subgoals = {"subgoals": [["(on b a)"], ["(on b a)", "(on c b)"]]}
    with FakeOpenAI([answer(subgoals)]) as server:
        made = delegate(server, solver, modes=("subgoals", "plan"))
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED and outcome.details["mode"] == "subgoals"
    assert validate_plan(task, outcome.plan).ok
    assert server.requests[0]["body"]["response_format"]["json_schema"]["schema"]["required"] == ["subgoals"]


def test_subgoal_with_unknown_object_is_repaired(task, solver):
    bad = {"subgoals": [["(on b zz)"]]}
    good = {"subgoals": [["(on b a)"], ["(on c b)"]]}
    with FakeOpenAI([answer(bad), answer(good)]) as server:
        made = delegate(server, solver, modes=("subgoals",))
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
    assert outcome.details["repair_rounds"] == 1
    assert "unknown object 'zz'" in outcome.details["critiques"][0]


def test_unreachable_subgoal_is_a_critique(task, solver):
    # Nothing can be on itself: the translator proves the subgoal unreachable.
    with FakeOpenAI([answer({"subgoals": [["(on a a)"]]}), answer({"subgoals": [["(on b a)"]]})]) as server:
        made = delegate(server, solver, modes=("subgoals",))
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
    assert "subgoal 1 ((on a a)) is unreachable" in outcome.details["critiques"][0]


def test_garbage_uses_every_repair_round_then_moves_on(task, solver):
    with FakeOpenAI([Reply(content="Sure! Here is my plan: pick up b, then...")]) as server:
        made = delegate(server, solver, repair_rounds=3)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.ERROR and outcome.plan is None
    assert outcome.details["llm_calls"] == 4 and outcome.details["repair_rounds"] == 3
    assert all("not JSON" in c for c in outcome.details["critiques"])


def test_schema_valid_nonsense_is_rejected(task, solver):
    nonsense = [
        answer({"plan": ["(fly-to moon)"]}),
        answer({"plan": ["(stack b)"]}),
        answer({"plan": ["(pick-up q)"]}),
        answer({"plan": []}),
    ]
    with FakeOpenAI(nonsense) as server:
        made = delegate(server, solver, repair_rounds=3)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.ERROR
    first, second, third, fourth = outcome.details["critiques"]
    assert "unknown action 'fly-to'" in first
    assert "expects 2 arguments" in second
    assert "unknown object 'q'" in third
    assert "goal not reached" in fourth and "(on b a)" in fourth


def test_fenced_json_from_a_server_that_ignores_the_schema_is_accepted(task, solver):
    fenced = "```json\n" + json.dumps({"plan": GOOD_PLAN}) + "\n```"
    with FakeOpenAI([Reply(content=fenced)]) as server:
        made = delegate(server, solver)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok


def test_server_that_rejects_response_format_is_asked_without_it(task, solver):
    rejected = Reply(status=400, content="response_format json_schema is not supported")
    with FakeOpenAI([rejected, answer({"plan": GOOD_PLAN})]) as server:
        made = delegate(server, solver)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED
    assert "response_format" not in server.requests[1]["body"]


def test_http_500_moves_on_with_the_reason(task, solver):
    with FakeOpenAI([Reply(status=500, content="model crashed")]) as server:
        made = delegate(server, solver, max_retries=1)
        outcome, elapsed = run(made, task)
        made.close()
    assert outcome.status is Status.ERROR
    assert "HTTP 500" in outcome.reason and "model crashed" in outcome.reason
    assert len(server.requests) == 2  # one retry, then give up
    assert outcome.plan is None


def test_429_retry_after_is_honoured(task, solver):
    limited = Reply(status=429, content="slow down", headers={"Retry-After": "1"})
    with FakeOpenAI([limited, answer({"plan": GOOD_PLAN})]) as server:
        made = delegate(server, solver)
        outcome, elapsed = run(made, task)
        made.close()
    assert outcome.status is Status.SOLVED and validate_plan(task, outcome.plan).ok
    assert len(server.requests) == 2
    assert elapsed >= 0.9  # waited as told before asking again


@pytest.mark.serial  # asserts it gives up before its 5 s budget
def test_429_retry_after_beyond_the_budget_gives_up_at_once(task, solver):
    limited = Reply(status=429, content="slow down", headers={"Retry-After": "120"})
    with FakeOpenAI([limited]) as server:
        made = delegate(server, solver)
        outcome, elapsed = run(made, task, budget=5.0)
        made.close()
    assert outcome.status is Status.ERROR and outcome.details["llm_error"] == "rate-limited"
    assert "Retry-After" in outcome.reason or "retry after 120" in outcome.reason
    assert elapsed < 5.0


@pytest.mark.serial  # asserts the 1.5 s budget
def test_a_server_that_never_answers_cannot_break_the_budget(task, solver):
    with FakeOpenAI([Reply(hang=True)]) as server:
        made = delegate(server, solver)
        outcome, elapsed = run(made, task, budget=1.5)
        made.close()
    assert outcome.status is Status.TIMEOUT and outcome.details["llm_error"] == "timeout"
    assert elapsed < 1.5 + 1.0  # the budget, with a tolerance for scheduling


def test_endpoint_down_is_recorded(task, solver):
    with FakeOpenAI([]) as server:
        url = server.url
    client = LLMClient(url, "m", api_key=KEY)
    outcome = LLMDelegate(client, solver=solver, modes=("plan",)).solve(PlanRequest(task), time.monotonic() + 5)
    client.close()
    assert outcome.status is Status.ERROR and outcome.details["llm_error"] == "unreachable"
    assert "cannot reach" in outcome.reason and KEY not in outcome.reason


def test_malformed_http_body_is_an_endpoint_error(task, solver):
    with FakeOpenAI([Reply(raw="<html>gateway</html>")]) as server:
        made = delegate(server, solver)
        outcome, _ = run(made, task)
        made.close()
    assert outcome.status is Status.ERROR and outcome.details["llm_error"] == "bad-response"


def test_key_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("PORTFOLIO_LLM_API_KEY", KEY)
    client = LLMClient("http://127.0.0.1:9/v1", "m")
    assert KEY not in repr(client) and "key=set" in repr(client)
    client.close()


# -- registry and cascade -----------------------------------------------------------------------------------


def test_registry_rejects_unknown_names_and_llm_without_url():
    with pytest.raises(ValueError, match="unknown delegate 'gpt'"):
        make_delegate("gpt")
    with pytest.raises(ValueError, match="--llm-url"):
        make_delegate("llm")


def test_delegates_llm_alone_in_the_cascade(task):
    replies = [answer({"subgoals": [["(on b zz)"]]}), answer({"subgoals": [["(on b a)"], ["(on c b)"]]})]
    with FakeOpenAI(replies) as server:
        tier = decomposer_tier(
            ["llm"], classical_names=[], llm_url=server.url, llm_model="m", decomposer_budget_s=20, llm_api_key=KEY
        )
        assert tier.name == "decomposer" and tier.budget_s == 20
        cascade = PortfolioDecomposition([tier])
        try:
            result = cascade.solve(PlanRequest(task))
        finally:
            cascade.close()
    assert result.solved and result.source == "llm" and result.delegate == "llm"
    assert validate_plan(task, result.actions()).ok
    (attempt,) = result.attempts
    assert attempt.details["llm_calls"] == 2 and attempt.details["repair_rounds"] == 1
    assert "unknown object 'zz'" in attempt.details["critiques"][0]
    assert KEY not in result.model_dump_json()


def test_cli_runs_classical_then_decomposer_tier(capsys):
    from portfolio.cli import main

    blocks = IPC / "blocks"
    with FakeOpenAI([answer({"subgoals": [["(on b a)"], ["(on c b)"]]})]) as server:
        code = main(
            [
                "plan",
                str(blocks / "domain.pddl"),
                str(blocks / "probBLOCKS-4-0.pddl"),
                "--json",
                "--budget",
                "0.001",
                "--llm-url",
                server.url,
                "--llm-model",
                "m",
                "--decomposer-budget",
                "20",
                "--no-carry-over",  # else Fast Downward's carried-over work wins
                # and translate afresh: with this task's translation in the session's disk cache (earlier
                # tests), Fast Downward's in-process search once solved it inside the 1 ms (a CI run)
                "--no-cache",
            ]
        )
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "solved"
    names = [a["delegate"] for a in result["attempts"]]
    # The classical tier had no time; the LLM delegate is next in the decomposer tier.
    assert names[:2] == ["fast-downward", "pyperplan"] and "llm" in names
    assert result["source"] == "llm" and result["delegate"] == "llm"
