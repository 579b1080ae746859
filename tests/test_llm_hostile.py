"""The LLM client against a hostile or broken OpenAI-protocol endpoint (the local fake server, real HTTP): the
key never leaks through an echoed error, an answer cannot exhaust memory, and a trickle cannot stretch the
deadline."""

from __future__ import annotations

import time

import pytest
from fake_openai import FakeOpenAI, Reply

from portfolio.delegates.llm_client import LLMClient, LLMError

KEY = "sk-test-SECRET-0123456789abcdefghijklmnopq"  # 43 characters, as in the report
SCHEMA = {"type": "object"}


def chat(server: FakeOpenAI, budget: float = 10.0) -> tuple[LLMError, float]:
    client = LLMClient(server.url, "m", api_key=KEY, max_retries=0)
    started = time.monotonic()
    try:
        with pytest.raises(LLMError) as caught:
            client.chat([{"role": "user", "content": "hi"}], "s", SCHEMA, started + budget)
    finally:
        client.close()
    return caught.value, time.monotonic() - started


@pytest.mark.parametrize("at", [0, 240, 250, 270])
def test_an_echoed_key_is_redacted_before_the_message_is_cut(at):
    """Before, the body was cut at 300 characters and then redacted: a key echoed at character 250 straddled
    the cut, was no longer the whole key and went out in the error (26 of 43 characters)."""
    with FakeOpenAI([Reply(echo_auth_at=at)]) as server:
        error, _ = chat(server)
    assert error.kind == "http-4xx"
    text = str(error)
    assert not any(KEY[i : i + 8] in text for i in range(len(KEY) - 7)), text


def test_an_answer_over_the_size_cap_is_refused_without_reading_it_all():
    with FakeOpenAI([Reply(body_bytes=32 * 2**20)]) as server:
        error, _ = chat(server)
    assert error.kind == "bad-response" and "over" in str(error) and "MB" in str(error)


@pytest.mark.serial  # asserts the 1.5 s budget
def test_every_read_is_bounded_by_the_time_left():
    """One byte at 1.2 s of a 1.5 s budget, then silence: before, the next read was given the whole budget
    again and the call took 2.7 s."""
    with FakeOpenAI([Reply(trickle_after_s=1.2)]) as server:
        error, elapsed = chat(server, budget=1.5)
    assert error.kind == "timeout"
    assert elapsed < 2.2, elapsed
