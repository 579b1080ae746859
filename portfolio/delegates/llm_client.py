"""A small client for OpenAI-compatible chat-completions endpoints (vLLM, Ollama, llama.cpp server, OpenAI).

It asks for JSON-schema structured output (`response_format: {"type": "json_schema", ...}`) but trusts nothing:
the caller re-validates every answer, because some servers ignore the schema. A server that rejects
`response_format` (HTTP 400 naming it) is asked again without it, once, and remembered.

Every call runs under a `time.monotonic()` deadline: connect and send get at most the time left, and the whole
answer must arrive by the deadline: a watchdog shuts the socket down when it passes, so an endpoint that
trickles one byte just before each read timeout cannot stretch the call (httpx gives every read the full
timeout again). A rate limit (429, or 503 with Retry-After) is waited out only when the wait fits in what is
left. An answer is read up to `MAX_ANSWER_BYTES` (a chat answer is kilobytes; an unbounded body can exhaust the
worker's memory: `docs/decisions/llm-answer-cap.md`). Failures raise `LLMError` with a `kind` the delegate records. The
API key (argument or env `PORTFOLIO_LLM_API_KEY`) goes into the Authorization header and nowhere else: not into
messages, reprs, logs or errors. Text from the endpoint is screened for it in every encoding it could come back in
(`portfolio.delegates.key_screen`): an error body is quoted with the key cut out (before the quote is cut short, never
after: a key echoed across the cut would otherwise leak in part), and an answer that holds the key is refused unread
(`key-echoed`), so nothing of it reaches a critique, a log, the trace store or the endpoint again.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from portfolio.delegates.key_screen import KeyScreen
from portfolio.engine import cancel
from portfolio.engine.results import Resource

log = logging.getLogger(__name__)

API_KEY_ENV = "PORTFOLIO_LLM_API_KEY"
# Leave this much of the budget when deciding whether a Retry-After wait is worth it: a retry that starts with
# less time than this left cannot get an answer anyway.
_MIN_CALL_S = 0.5
MAX_ANSWER_BYTES = 4 * 1024 * 1024
_QUOTED = 300  # characters of an error body quoted in the LLMError


class LLMError(Exception):
    """A call that produced no usable answer. `kind` is one of: unreachable, timeout, rate-limited, http-4xx,
    http-5xx, bad-response, key-echoed (the answer repeats the API key: refused unread)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class LLMReply:
    content: str  # the assistant message text (JSON when the server honoured response_format)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    attempts: int = 1  # HTTP requests made for this reply (retries included)


class LLMClient(Resource):
    """Chat completions against `base_url` (ending in /v1) with `model`.

    `max_retries` bounds retries after 5xx answers and rate limits; each retry still has to fit in the deadline.
    `transport` is for tests that want an in-process httpx transport; normal use talks real HTTP.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        max_retries: int = 2,
        temperature: float = 0.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url:
            raise ValueError("an LLM base URL is needed, e.g. http://localhost:8000/v1")
        if not model:
            raise ValueError("an LLM model name is needed (--llm-model)")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_retries = max_retries
        self.temperature = temperature
        self._api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self._screen = KeyScreen(self._api_key) if self._api_key else None
        self._structured = True  # becomes False when the server rejects response_format
        self._http = httpx.Client(transport=transport, follow_redirects=False)

    def __repr__(self) -> str:  # no key in reprs (tracebacks, logs)
        return f"LLMClient(base_url={self.base_url!r}, model={self.model!r}, key={'set' if self._api_key else 'unset'})"

    def _redact(self, text: str, limit: int = _QUOTED) -> str:
        """`text` without the key in any encoding, then cut to `limit` characters (in that order: see the module
        docstring)."""
        if self._screen is not None:
            text = self._screen.redact(text)
        return text[:limit]

    def chat(
        self, messages: list[dict[str, str]], schema_name: str, schema: dict[str, Any], deadline: float
    ) -> LLMReply:
        """One assistant answer to `messages`, asked to follow `schema`. Raises LLMError."""
        attempts = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LLMError("timeout", "budget used up before the LLM answered")
            attempts += 1
            body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
            if self._structured:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": schema, "strict": True},
                }
            response = self._post(body, remaining)
            status = response.status_code
            if status == 200:
                return self._reply(response, attempts)
            text = self._redact(response.text).strip()
            if status == 400 and self._structured and ("response_format" in text or "json_schema" in text):
                log.info("LLM server rejected response_format; asking without it from now on")
                self._structured = False
                continue
            if status == 429 or (status >= 500 and attempts <= self.max_retries):
                wait = _retry_after(response) if status in (429, 503) else None
                if wait is None:
                    wait = 0.5 * attempts
                left = deadline - time.monotonic()
                if attempts > self.max_retries:
                    raise LLMError("rate-limited", f"HTTP 429 after {attempts} attempts: {text}")
                if wait + _MIN_CALL_S > left:
                    kind = "rate-limited" if status == 429 else "http-5xx"
                    raise LLMError(
                        kind,
                        f"HTTP {status}; retry after {wait:g} s does not fit in the {max(left, 0):.1f} s left: {text}",
                    )
                log.info("LLM server answered HTTP %s; retrying in %.2f s", status, wait)
                if cancel.sleep_until(time.monotonic() + wait):
                    raise LLMError("timeout", "stopped: the cascade has its answer")
                continue
            kind = "http-5xx" if status >= 500 else "http-4xx"
            raise LLMError(kind, f"HTTP {status} from {self.base_url}/chat/completions: {text}")

    def _post(self, body: dict[str, Any], remaining: float) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        deadline = time.monotonic() + remaining
        watchdog = _Watchdog(deadline)
        try:
            with self._http.stream(
                "POST",
                f"{self.base_url}/chat/completions",
                json=body,
                headers=headers,
                timeout=httpx.Timeout(remaining),
                extensions={"trace": watchdog.trace},
            ) as response:
                watchdog.watch(response.extensions.get("network_stream"))  # a pooled connection has no connect
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                    raise self._too_large()
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise self._too_large()
                    if time.monotonic() > deadline:
                        raise LLMError("timeout", f"LLM answer still arriving after {remaining:.1f} s")
                return httpx.Response(response.status_code, headers=response.headers, content=b"".join(chunks))
        except httpx.TimeoutException:
            raise LLMError("timeout", f"no answer from {self.base_url} within {remaining:.1f} s") from None
        except (httpx.TransportError, httpx.StreamError) as error:
            if watchdog.fired:
                raise LLMError("timeout", f"LLM answer still arriving after {remaining:.1f} s") from None
            message = self._redact(str(error)) or type(error).__name__
            raise LLMError("unreachable", f"cannot reach {self.base_url}: {message}") from None
        finally:
            watchdog.cancel()

    def _too_large(self) -> LLMError:
        return LLMError(
            "bad-response",
            f"the answer from {self.base_url} is over {MAX_ANSWER_BYTES // 2**20} MB "
            "(a chat answer is kilobytes); not read further",
        )

    def _reply(self, response: httpx.Response, attempts: int) -> LLMReply:
        try:
            data = response.json()
            content = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(
                "bad-response", "HTTP 200 but not a chat-completions answer: " + self._redact(response.text, 200)
            ) from None
        if not isinstance(content, str):
            raise LLMError("bad-response", "the answer has no text content")
        if self._screen is not None and self._screen.found(content):
            raise LLMError(
                "key-echoed",
                "the answer repeats the API key (in some encoding); refused unread, so that nothing of it is "
                "quoted, logged, stored or sent back",
            )
        usage = data.get("usage") or {}

        def count(key: str) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) else 0

        prompt, completion = count("prompt_tokens"), count("completion_tokens")
        return LLMReply(content, prompt, completion, count("total_tokens") or prompt + completion, attempts)

    def close(self) -> None:
        self._http.close()


class _Watchdog:
    """Shuts the connection's socket down at `deadline`, which wakes a read blocked on it (httpx restarts its
    read timeout at every read, so the timeout alone bounds the gaps, not the call). The socket is learnt
    from httpcore's connect trace for a new connection, or from the response for a pooled one."""

    def __init__(self, deadline: float) -> None:
        self.fired = False
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            self.watch(info.get("return_value"))

    def watch(self, stream: Any) -> None:
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        with self._lock:
            self._socket = sock
            fired = self.fired
        if fired:
            _shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sock = self._socket
        if sock is not None:
            _shutdown(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None if absent."""
    milliseconds = response.headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def extract_json(content: str) -> Any:
    """The JSON value in an answer: the whole text, or the outermost {...} in it (servers that do not enforce
    the schema wrap JSON in prose or ``` fences). Raises ValueError with what was wrong."""
    text = content.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        start, end = text.find("{"), text.rfind("}")
        if start != -1 and end > start:
            try:
                return json.loads(text[start : end + 1])
            except json.JSONDecodeError:
                pass
        raise ValueError(f"the answer is not JSON ({first.msg} at line {first.lineno} column {first.colno})") from None
