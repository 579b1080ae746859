"""Connection limits for the HTTP server: uvicorn's h11 protocol with a cap on open connections and deadlines
for idle and half-sent requests.

uvicorn keeps a connection that never sends a byte, or sends half a request, for good, and accepts connections
past its concurrency limit; a few hundred idle sockets can then exhaust the descriptors or lock other clients
out. So here (`ConnectionLimits`, enforced by `guarded_protocol`, run by `uvicorn_config` and `Server`):

- `idle_s`: a connection that has sent nothing since it opened, or since its last answer, is closed;
- `request_s`: a request must arrive whole (headers and body) within this time of its first byte, so a
  trickle of one byte every few seconds does not keep it open either;
- `max_connections`: the cap on open connections, by default derived from the descriptor limit
  (`default_max_connections`: RLIMIT_NOFILE less a reserve for the workers' pipes, the trace store and two
  accept bursts, the backlog being kept small enough for a burst to fit: `accept_burst`), so accept() does not
  fail for want of descriptors; `max_per_client` the share of one client address (half the cap). A connection
  over either takes the place of the connection idle longest (of its address, for its share), which is closed;
  only when none is idle is the new one closed. Held-open idle sockets therefore cannot lock anyone out.
- Whatever is refused, and accept() failing all the same (descriptors taken by something else), is logged once
  per `LOG_EVERY_S` with a count (`Throttled`, `quiet_accept_errors`), never once per connection or attempt.

Time spent by the app on a request that has arrived (a long plan) is not limited here: the pool's deadlines
bound it. Every accepted TCP connection gets `TCP_NODELAY` (`set_nodelay`): the listening socket's accepted
sockets do not get it from asyncio, and without it a keep-alive answer waits for the client's delayed ACK.

    config = uvicorn_config(app, ConnectionLimits(idle_s=10.0, workers=2), host="127.0.0.1", port=8000)
    Server(config).run()

What was measured with uvicorn alone, with a plain cap, and without `TCP_NODELAY`:
docs/decisions/connection-limits.md.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import resource
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


# Descriptors the server holds besides its connections: measured 18 at rest with two planner workers, two
# validators and a trace store (a pipe pair per worker, the store's three files, the listening socket, epoll,
# /dev/null); a worker being replaced holds its old and its new pipes for a moment, a call that can be stopped a
# pipe pair more, SQLite a journal, logging a file: a base, and a share per worker process, with room to spare.
RESERVED_FDS = 48
RESERVED_FDS_PER_WORKER = 8
MAX_CONNECTIONS = 1024  # the default cap however many descriptors the process may open
# How often a throttled warning (connections closed, accept() failing) is logged, at most, with its count
LOG_EVERY_S = 10.0


def descriptor_limit() -> int | None:
    """The descriptors this process may open (RLIMIT_NOFILE's soft limit); None without a limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def accept_burst(limit: int | None) -> int:
    """Connections accepted in one turn of the event loop, at most: asyncio accepts up to the listen backlog at
    once, before any of them is seen by the protocol (which closes what is over the cap), so the burst must fit
    the descriptors too. uvicorn's default backlog, 2,048, ran a server with 256 descriptors out of them."""
    return 128 if limit is None else max(8, min(128, limit // 16))


def default_max_connections(workers: int = 2, limit: int | None = None) -> int:
    """The most connections a server with `workers` worker processes (planner workers and validators) keeps
    open under the descriptor limit `limit` (default this process's): the limit less what the server needs
    besides (`RESERVED_FDS`, `RESERVED_FDS_PER_WORKER` each) and two accept bursts (one being accepted, one
    being closed), at most `MAX_CONNECTIONS`, at least 8."""
    limit = descriptor_limit() if limit is None else limit
    if limit is None:
        return MAX_CONNECTIONS
    spare = limit - RESERVED_FDS - RESERVED_FDS_PER_WORKER * workers - 2 * accept_burst(limit)
    return max(8, min(MAX_CONNECTIONS, spare))


@dataclass(frozen=True)
class ConnectionLimits:
    """`idle_s`, `request_s`: the deadlines above. `max_connections`: the cap (None: `default_max_connections`;
    a cap over what the descriptors allow is lowered to it, with a warning). `max_per_client`: connections from
    one client address (None: half the cap). `workers`: the worker processes the server keeps pipes to."""

    idle_s: float = 10.0
    request_s: float = 60.0
    max_connections: int | None = None
    max_per_client: int | None = None
    workers: int = 2

    def connections(self) -> int:
        allowed = default_max_connections(self.workers)
        if self.max_connections is None:
            return allowed
        if self.max_connections > allowed:
            log.warning(
                "--max-connections %d is more than %d descriptors allow (%d kept for the server's workers, store "
                "and accept bursts); the cap is %d",
                self.max_connections,
                descriptor_limit(),
                (descriptor_limit() or 0) - allowed,
                allowed,
            )
            return allowed
        return self.max_connections

    def per_client(self) -> int:
        return self.max_per_client or max(1, self.connections() // 2)

    def backlog(self) -> int:
        return accept_burst(descriptor_limit())


class Throttled:
    """A warning logged once per `every_s` at most, with the count of what happened since (`note`): a flood
    of refused connections or failing accept() calls makes a log line per interval, not one per attempt."""

    def __init__(self, message: str, every_s: float = LOG_EVERY_S) -> None:
        self.message, self.every_s = message, every_s
        self.count = 0
        self.last = 0.0
        self._flush: asyncio.TimerHandle | None = None

    def note(self, loop: asyncio.AbstractEventLoop, detail: str) -> None:
        """Count one event; log now if the last line is `every_s` old, else once that time has come."""
        self.count += 1
        self.detail = detail
        if time.monotonic() - self.last >= self.every_s:
            self.flush()
        elif self._flush is None:
            self._flush = loop.call_later(self.every_s - (time.monotonic() - self.last), self.flush)

    def flush(self) -> None:
        self._flush = None
        if self.count:
            log.warning("%s: %d in the last %.0f s (%s)", self.message, self.count, self.every_s, self.detail)
            self.count = 0
            self.last = time.monotonic()


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log accept() failing for want of descriptors or memory once per `LOG_EVERY_S`, with a count, instead of
    asyncio's traceback per failed call (it retries up to the backlog's length at once, then every second:
    8,027 tracebacks, 3.4 MB, were measured with 400 sockets under 256 descriptors). Anything else goes to the
    handler there was."""
    previous = loop.get_exception_handler()
    throttled = Throttled("accept() failed, the server is out of descriptors or memory (connections wait)")

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith("socket.accept() out of system resource"):
            throttled.note(loop, f"{context.get('exception')}; descriptor limit {descriptor_limit()}")
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


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


@dataclass
class _Open:
    """The connections a server's protocols share: which are idle (awaiting a request: none sent yet, or the
    last one answered), oldest first, and how many each client address holds."""

    connections: set[Any] = field(default_factory=set)
    idle: collections.OrderedDict[Any, None] = field(default_factory=collections.OrderedDict)
    per_client: collections.Counter[str] = field(default_factory=collections.Counter)

    def oldest_idle(self, client: str | None = None) -> Any:
        """The connection idle longest (of `client`'s, when given), or None."""
        return next((c for c in self.idle if client is None or c.client_host == client), None)


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """An `H11Protocol` class that enforces `limits` (uvicorn's `http=` takes a class) and sets `TCP_NODELAY` on
    every connection it accepts. Over the cap, or over its address's share, a new connection takes the place of
    the connection idle longest (of that address, for its share): it is closed, and the new one kept. Only when
    none is idle is the new connection closed. So held-open idle sockets cannot lock anyone out: a client that
    connects and sends its request is served, at the cost of an idle connection nobody was using."""
    cap, per_client = limits.connections(), limits.per_client()
    shared = _Open()
    refused = Throttled(f"connections closed to stay within --max-connections {cap} ({per_client} per client)")

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            set_nodelay(transport)
            super().connection_made(transport)
            self._deadline: asyncio.TimerHandle | None = None
            self.client_host = self.client[0] if self.client else ""
            shared.connections.add(self)
            shared.per_client[self.client_host] += 1
            over_client = shared.per_client[self.client_host] > per_client
            if over_client or len(shared.connections) > cap:
                victim = shared.oldest_idle(self.client_host if over_client else None)
                if victim is None:  # every one has a request in flight: the new one waits its turn elsewhere
                    refused.note(self.loop, f"{len(shared.connections)} open, none idle: new ones closed")
                    self._close()
                    return
                refused.note(self.loop, "the ones idle longest closed to make room")
                victim._close()
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
            self._forget()
            super().connection_lost(exc)

        def _close(self) -> None:
            """Close the connection and stop counting it at once (`connection_lost` comes a turn later)."""
            self._forget()
            self.transport.close()

        def _forget(self) -> None:
            self._disarm()
            if self in shared.connections:
                shared.connections.discard(self)
                shared.per_client[self.client_host] -= 1
                if shared.per_client[self.client_host] <= 0:
                    del shared.per_client[self.client_host]

        def _arm(self, seconds: float, idle: bool) -> None:
            self._disarm()
            self._idle = idle
            if idle:
                shared.idle[self] = None  # newest last: the first is the one idle longest
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            shared.idle.pop(self, None)
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
            self._close()

    return GuardedH11Protocol


# Connections the kernel completes and queues for accept(): uvicorn's default. The backlog given to asyncio is
# smaller (`accept_burst`), as it is also how many it accepts at once; `Server` gives the kernel this one after.
LISTEN_QUEUE = 2048


class Server(uvicorn.Server):
    """`uvicorn.Server` whose listening sockets queue `LISTEN_QUEUE` connections in the kernel while asyncio
    accepts them `accept_burst` at a time. With the kernel's queue as short as the burst (16 under 256
    descriptors), a client that connected while a few dozen others did found it full and waited for its
    SYN to be sent again, 1 s later."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        for sock in sockets or ():
            sock.listen(LISTEN_QUEUE)  # asyncio listened with the burst; this sets the kernel's queue only


def uvicorn_config(app: Any, limits: ConnectionLimits | None = None, **options: Any):
    """The `uvicorn.Config` the service runs (with `Server`): the guarded protocol, and uvicorn's own
    concurrency limit (answered 503) at the same cap."""
    limits = limits or ConnectionLimits()
    # uvicorn answers 503 from `limit_concurrency` open connections on; ours keeps them within the cap. The
    # backlog is also how many connections asyncio accepts at once (`accept_burst`).
    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        limit_concurrency=limits.connections() + 1,
        backlog=limits.backlog(),
        **options,
    )
