"""Connections an attacker holds open (real uvicorn on loopback, raw sockets): idle and half-sent connections
are closed on their deadlines, connections beyond the cap are closed at once, and the service keeps answering;
the auth scheme is case-insensitive; every accepted connection sends at once (TCP_NODELAY)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from test_service_helpers import config, serve_in_thread


@pytest.fixture(scope="module")
def served():
    """(base URL, the `uvicorn.Server`)."""
    from portfolio.serve.connections import ConnectionLimits

    limits = ConnectionLimits(idle_s=0.5, request_s=1.0, max_connections=40)
    servers: list = []
    with serve_in_thread(config(), token="tok", limits=limits, servers=servers) as (url, svc):
        yield url, servers[0]


@pytest.fixture(scope="module")
def server(served):
    return served[0]


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_an_idle_connection_is_closed(server):
    sock = connect(server)
    try:
        assert closed_by_server(sock, within=3)  # before: kept for good
    finally:
        sock.close()


def test_a_half_sent_request_is_closed_even_when_it_trickles(server):
    sock = connect(server)
    try:
        sock.sendall(b"POST /v1/steps HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        started = time.monotonic()
        sock.settimeout(0.3)
        while time.monotonic() - started < 3:  # a byte now and then, more often than the idle deadline
            try:
                if sock.recv(1024) == b"":
                    break
            except TimeoutError:
                sock.sendall(b" ")
            except (ConnectionResetError, BrokenPipeError):
                break
        else:
            pytest.fail("a request trickling in was kept open past its deadline")
    finally:
        sock.close()


def test_connections_beyond_the_cap_are_closed_and_the_service_keeps_answering(server):
    socks = [connect(server) for _ in range(60)]
    try:
        time.sleep(0.2)
        alive = sum(not closed_by_server(s, within=0.05) for s in socks)
        assert alive <= 40
        # the held ones go at their idle deadline; meanwhile and after, health still answers
        time.sleep(1.0)
        assert httpx.get(server + "/v1/health", timeout=5).status_code == 200
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_auth_scheme_is_case_insensitive(server, scheme):
    answer = httpx.get(server + "/v1/actions", headers={"Authorization": f"{scheme} tok"}, timeout=5)
    assert answer.status_code == 400  # past auth: this server has no trace store
    assert httpx.get(server + "/v1/actions", headers={"Authorization": f"{scheme} nope"}, timeout=5).status_code == 401


@pytest.mark.parametrize(
    "request_head",
    [
        b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["http", "mcp"],
)
def test_the_accepted_connection_sends_without_delay(served, request_head):
    """Before, asyncio left Nagle's algorithm on for sockets accepted from `socket.create_server`'s (proto 0):
    the second piece of every answer on a keep-alive connection waited ~40 ms for the client's delayed ACK."""
    url, uvicorn_server = served
    sock = connect(url)
    try:
        sock.sendall(request_head)
        answer = b""
        while b"\r\n\r\n" not in answer:  # the head of the answer: the server has accepted and read it
            chunk = sock.recv(4096)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 ") and not answer.startswith(b"HTTP/1.1 5"), answer
        ours = [
            protocol.transport.get_extra_info("socket")
            for protocol in list(uvicorn_server.server_state.connections)
            if protocol.transport.get_extra_info("peername") == sock.getsockname()
        ]
        assert len(ours) == 1
        assert ours[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()
