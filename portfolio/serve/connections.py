"""Connection limits for the HTTP server: uvicorn's h11 protocol with a cap on open connections and deadlines
for idle and half-sent requests.

uvicorn (0.54) only times out a keep-alive connection after a response; a connection that never sends a
byte, or sends half a request and stops, is kept for good, and a connection over `limit_concurrency` is still
accepted (it is answered 503 only once a request arrives). Measured: with a descriptor limit of 256, 300 idle
sockets made /v1/health time out and the accept loop logged 298,965 errors (125 MB) in 8 s. So here:

- `idle_s`: a connection that has sent nothing since it opened, or since its last answer, is closed;
- `request_s`: a request must arrive whole (headers and body) within this time of its first byte, so a
  trickle of one byte every few seconds does not keep it open either;
- `max_connections`: a connection beyond it is closed at once, before it costs more than its descriptor,
  and the default stays well under the process's descriptor limit (the planner workers' pipes, the trace
  store and the accept loop need the rest), so accept() never fails for want of descriptors.

Time spent by the app on a request that has arrived (a long plan) is not limited here: the pool's deadlines
bound it.

Every accepted TCP connection gets `TCP_NODELAY` (`set_nodelay`). asyncio sets it only on a socket whose `proto`
is `IPPROTO_TCP`, and `socket.create_server` (how `portfolio serve` listens) makes one with `proto` 0, which its
accepted sockets inherit: Nagle's algorithm then held back the last small write of a response until the client's
delayed ACK, about 40 ms added to every answer on a keep-alive connection (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


def default_max_connections() -> int:
    """Half the descriptors this process may open, at most 1024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(16, min(1024, soft // 2))


@dataclass(frozen=True)
class ConnectionLimits:
    idle_s: float = 10.0
    request_s: float = 60.0
    max_connections: int | None = None  # None: `default_max_connections()`

    def connections(self) -> int:
        return self.max_connections or default_max_connections()


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Send what the server writes at once (`TCP_NODELAY`) on `transport`'s socket, if it is a TCP one; a
    connection the peer has already reset is left as it is (its transport reports the error)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """An `H11Protocol` class that enforces `limits` (uvicorn's `http=` takes a class) and sets `TCP_NODELAY` on
    every connection it accepts."""
    cap = limits.connections()

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            set_nodelay(transport)
            super().connection_made(transport)
            self._deadline: asyncio.TimerHandle | None = None
            if len(self.connections) > cap:
                log.warning("closing a connection: %d open, the limit is %d", len(self.connections), cap)
                transport.close()
                return
            self._arm(limits.idle_s, idle=True)

        def data_received(self, data: bytes) -> None:
            if self._deadline is not None and self._idle:
                self._arm(limits.request_s, idle=False)  # the request has begun: it must now arrive whole
            super().data_received(data)
            if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
                self._disarm()  # the whole request is in: the app's own deadlines take over

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm(limits.idle_s, idle=True)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self, seconds: float, idle: bool) -> None:
            self._disarm()
            self._idle = idle
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            deadline = getattr(self, "_deadline", None)
            if deadline is not None:
                deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            if self.cycle is not None and not self.cycle.response_complete:
                self.cycle.disconnected = True  # the app waiting for the rest of the body gets a disconnect
                self.cycle.message_event.set()
            self.transport.close()

    return GuardedH11Protocol


def uvicorn_config(app: Any, limits: ConnectionLimits | None = None, **options: Any):
    """The `uvicorn.Config` the service runs with: the guarded protocol, and uvicorn's own concurrency limit
    (answered 503) at the same cap."""
    import uvicorn

    limits = limits or ConnectionLimits()
    # uvicorn answers 503 from `limit_concurrency` open connections on; ours closes the one beyond the cap
    return uvicorn.Config(app, http=guarded_protocol(limits), limit_concurrency=limits.connections() + 1, **options)
