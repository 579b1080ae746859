"""The LLM key never comes back out of the planner in any encoding: not from an endpoint's error body, not from an
answer (a plan or subgoals that hold it), through the real client against the local fake OpenAI server, nor from
the service (its answer, its logs, the trace store's `plans.attempts`). An answer that repeats the key is refused
unread: nothing of it goes into a critique or back to the endpoint."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from urllib.parse import quote, quote_plus

import httpx
import pytest
import test_llm
from fake_openai import FakeOpenAI, Reply, answer
from test_service_helpers import config, serve_in_thread, small_plan

from portfolio.delegates.llm import LLMDelegate
from portfolio.delegates.llm_client import LLMClient, LLMError
from portfolio.engine.results import PlanRequest, Status

# '/', '+' and '=' make every encoding differ from the key as it is; both letter cases make case matter
KEY = "sk-Test/SECRET+0123456789abcdef=XYZuvw"
SCHEMA = {"type": "object"}
task, solver = test_llm.task, test_llm.solver  # test_llm's fixtures: blocks-4 and a warm SubgoalSolver


def b64_inside(shift: int, alphabet=base64.b64encode) -> str:
    """The key base64-encoded inside a longer string, `shift` bytes after a 3-byte boundary."""
    return alphabet(b"P" * (3 + shift) + KEY.encode() + b"tail-bytes").decode()


ENCODINGS = {
    "verbatim": KEY,
    "upper": KEY.upper(),
    "lower": KEY.lower(),
    "json-slash": KEY.replace("/", "\\/"),
    "json-unicode": "".join(f"\\u{ord(c):04x}" for c in KEY),
    "json-unicode-twice": "".join(f"\\\\u{ord(c):04x}" for c in KEY),  # a JSON string inside a JSON string
    "quote-of-json": quote(KEY.replace("/", "\\/"), safe=""),
    "quote": quote(KEY, safe=""),
    "quote-lower-hex": quote(KEY, safe="").replace("%2F", "%2f").replace("%2B", "%2b").replace("%3D", "%3d"),
    "quote-plus": quote_plus(KEY),
    "quote-upper": quote(KEY, safe="").upper(),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "base64-urlsafe": base64.urlsafe_b64encode(KEY.encode()).decode(),
    "base64-in-0": b64_inside(0),
    "base64-in-1": b64_inside(1),
    "base64-in-2": b64_inside(2),
    "base64-urlsafe-in-1": b64_inside(1, base64.urlsafe_b64encode),
    "hex": KEY.encode().hex(),
    "hex-upper": KEY.encode().hex().upper(),
}


def leaks(text: str) -> list[str]:
    """The encodings of the key (or an 12-character piece of one) found in `text`, ignoring case."""
    folded = text.casefold()
    found = []
    for name, encoded in ENCODINGS.items():
        if name.startswith("base64"):
            # the characters of an encoded key inside a longer string that depend on the key alone
            pieces = [encoded[i : i + 16] for i in range(4, len(encoded) - 24, 4)]
            if any(piece in text for piece in pieces):
                found.append(name)
        elif any(encoded[i : i + 12].casefold() in folded for i in range(len(encoded) - 11)):
            found.append(name)
    return found


def test_the_leak_check_sees_every_encoding():
    for name, encoded in ENCODINGS.items():
        assert name in leaks(f"xx {encoded} yy"), name


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_an_error_body_that_echoes_the_key_in_any_encoding_does_not_leak_it(name):
    body = '{"error": {"message": "invalid key: ' + ENCODINGS[name] + ' (check it)"}}'  # as it is, not escaped again
    with FakeOpenAI([Reply(status=401, raw=body)]) as server:
        client = LLMClient(server.url, "m", api_key=KEY, max_retries=0)
        try:
            with pytest.raises(LLMError) as caught:
                client.chat([{"role": "user", "content": "hi"}], "s", SCHEMA, time.monotonic() + 10)
        finally:
            client.close()
    assert caught.value.kind == "http-4xx"
    assert not leaks(str(caught.value)), str(caught.value)


CONTENTS = {
    "plan": lambda encoded: {"plan": [f"(pick-up {encoded})"]},
    "subgoals": lambda encoded: {"subgoals": [[f"(on a {encoded})"]]},
    "prose": lambda encoded: {"plan": ["(pick-up b)"], "note": f"my key is {encoded}"},
}


@pytest.mark.parametrize("shape", list(CONTENTS))
@pytest.mark.parametrize("name", ["verbatim", "upper", "json-slash", "quote-plus", "base64-in-2", "hex"])
def test_an_answer_that_holds_the_key_is_refused_unread(task, solver, caplog, shape, name):
    mode = "subgoals" if shape == "subgoals" else "plan"
    content = json.dumps(CONTENTS[shape](ENCODINGS[name]))
    with FakeOpenAI([Reply(content=content)]) as server:
        client = LLMClient(server.url, "m", api_key=KEY)
        delegate = LLMDelegate(client, solver=solver, modes=(mode,), repair_rounds=2)
        try:
            with caplog.at_level("DEBUG"):
                outcome = delegate.solve(PlanRequest(task), time.monotonic() + 20)
        finally:
            client.close()
        sent = list(server.requests)
    assert outcome.status is Status.ERROR and outcome.details["llm_error"] == "key-echoed", outcome
    assert "API key" in outcome.reason
    assert len(sent) == 1  # not sent back to the endpoint in a repair round
    assert not leaks(json.dumps(outcome.details) + outcome.reason + caplog.text)


def test_a_served_plan_never_hands_the_key_back_nor_stores_it(tmp_path, monkeypatch, capfd):
    """The report's case: a key inside an answer's subgoals came back through the critique into the client's
    answer and the stored `plans.attempts`."""
    monkeypatch.setenv("PORTFOLIO_LLM_API_KEY", KEY)  # the workers read it from their environment
    traces = tmp_path / "traces.db"
    replies = [answer({"subgoals": [[f"(on a {ENCODINGS['json-slash']})"]]}), answer({"plan": [f"(pick-up {KEY})"]})]
    with FakeOpenAI(replies) as server:
        settings = config(delegates=["llm"], llm_url=server.url, llm_model="m", traces=str(traces))
        with serve_in_thread(settings) as (url, _):
            reply = httpx.post(url + "/v1/plan", json=small_plan(), timeout=60)
        assert server.requests  # the LLM was asked
    assert reply.status_code == 200 and reply.json()["status"] != "solved", reply.text
    assert "key-echoed" in reply.text and not leaks(reply.text), reply.text
    with sqlite3.connect(traces) as db:
        stored = " ".join(row[0] for row in db.execute("SELECT attempts FROM plans"))
    assert "key-echoed" in stored and not leaks(stored), stored
    assert not leaks("".join(capfd.readouterr()))
