"""A local HTTP server that speaks the OpenAI chat-completions protocol and replays scripted answers.

No network and no model in tests: the real `LLMClient` talks real HTTP to 127.0.0.1, and this server answers
`POST /v1/chat/completions` with the next scripted `Reply` (the last one repeats). It records every request (body
and headers) so tests can check what the client sent. A `hang` reply never answers until the server stops.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str | None = None  # assistant message text; None with `raw` for a non-chat body
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None  # the whole response body instead of a chat completion
    hang: bool = False
    usage: tuple[int, int] = (100, 20)  # prompt, completion tokens
    echo_auth_at: int | None = None  # a 401 whose body echoes the Authorization header at this character
    trickle_after_s: float | None = None  # headers at once, one body byte after this many seconds, then silence
    body_bytes: int | None = None  # a 200 streaming this many bytes (a runaway answer)


def answer(data: Any, **kwargs: Any) -> Reply:
    """A 200 reply whose assistant content is `data` as JSON."""
    return Reply(content=json.dumps(data), **kwargs)


class FakeOpenAI:
    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    index = min(len(fake.requests), len(fake.replies)) - 1
                    reply = fake.replies[index]
                if self.path != "/v1/chat/completions":
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}), {})
                    return
                if reply.hang:
                    fake._stop.wait(60)
                    return
                if reply.echo_auth_at is not None:
                    echoed = "x" * reply.echo_auth_at + "you sent: " + self.headers.get("Authorization", "")
                    self._send(401, echoed + " " + "y" * 200, {})
                    return
                if reply.trickle_after_s is not None or reply.body_bytes is not None:
                    self._stream(reply)
                    return
                if reply.raw is not None:
                    self._send(reply.status, reply.raw, reply.headers)
                    return
                if reply.status != 200:
                    self._send(
                        reply.status, json.dumps({"error": {"message": reply.content or "error"}}), reply.headers
                    )
                    return
                prompt, completion = reply.usage
                payload = {
                    "id": f"chatcmpl-{len(fake.requests)}",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                }
                self._send(200, json.dumps(payload), reply.headers)

            def _stream(self, reply: Reply) -> None:
                size = reply.body_bytes or 1000
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                try:
                    self.wfile.flush()
                    if reply.trickle_after_s is not None:
                        if fake._stop.wait(reply.trickle_after_s):
                            return
                        self.wfile.write(b"{")
                        self.wfile.flush()
                        fake._stop.wait(60)
                        return
                    chunk = b" " * (1 << 20)
                    for _ in range(size // len(chunk)):
                        if fake._stop.is_set():
                            return
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, status: int, text: str, headers: dict[str, str]) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # serve_forever looks for shutdown() between polls: at its default 0.5 s, closing the server took up to
        # half a second of every test that used one
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
