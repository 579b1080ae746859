"""Helpers for the service tests (no tests here): a real uvicorn server on a free loopback port, in a thread,
and a `portfolio serve` subprocess for the lifecycle tests."""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import threading

import httpx
from support import IPC, hardest_parking, wait_until

from benchmarks.bench_service import launch, ready

BLOCKS_DOMAIN = (IPC / "blocks" / "domain.pddl").read_text()
BLOCKS_4 = (IPC / "blocks" / "probBLOCKS-4-0.pddl").read_text()
PARKING_DOMAIN = (IPC / "parking-sat11-strips" / "domain.pddl").read_text()
# The largest parking problem: its translation alone takes longer than any budget the tests give it.
PARKING_HARD = hardest_parking().read_text()

BOOM_DOMAIN = """(define (domain boom) (:requirements :strips)
  (:predicates (p ?x) (q ?a ?b ?c ?d ?e) (done))
  (:action make :parameters (?a ?b ?c ?d ?e)
    :precondition (and (p ?a) (p ?b) (p ?c) (p ?d) (p ?e)) :effect (q ?a ?b ?c ?d ?e))
  (:action finish :parameters (?a) :precondition (q ?a ?a ?a ?a ?a) :effect (done)))"""


def boom_problem(objects: int = 60) -> str:
    """60^5 = 777 million groundings of `make`: the translator's grounding explodes."""
    names = " ".join(f"o{i}" for i in range(objects))
    init = " ".join(f"(p o{i})" for i in range(objects))
    return f"(define (problem boom) (:domain boom) (:objects {names}) (:init {init}) (:goal (done)))"


def small_plan() -> dict:
    return {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4}


def long_plan(budget: float) -> dict:
    """A request that keeps a worker busy for about `budget` seconds and then times out."""
    return {"domain": PARKING_DOMAIN, "problem": PARKING_HARD, "budget": budget}


def config(**overrides):
    from portfolio.serve.config import ServiceConfig

    values = dict(
        workers=1,
        queue=8,
        budget_s=1.0,
        max_budget_s=30.0,
        decomposer_budget_s=5.0,
        delegates=["fast-downward", "pyperplan"],
        traces=None,
        memory_limit_mb=4096,
    )
    values.update(overrides)
    return ServiceConfig(**values)


@contextlib.contextmanager
def serve_in_thread(
    service_config,
    token: str | None = None,
    max_body_bytes: int = 32 * 1024 * 1024,
    limits=None,
    large_body_budget: int | None = None,
    public_docs: bool = False,
    servers: list | None = None,
    insecure: bool | None = None,
    quotas=None,
    allowed_hosts=(),
):
    """Yield (base URL, Service) for a uvicorn server running the app on a free 127.0.0.1 port, with the
    connection limits `portfolio serve` uses (`limits`: a `ConnectionLimits`, default the defaults). The
    `uvicorn.Server` is appended to `servers`, when given, for a test that looks at its connections.
    `insecure` (default: when there is neither a token nor a key in the trace store) serves without keys, as
    `portfolio serve --insecure` does; `quotas`: a `QuotaDefaults`."""
    from portfolio.serve.connections import Server, uvicorn_config
    from portfolio.serve.http import create_app
    from portfolio.serve.service import Service

    service = Service(service_config)
    if insecure is None:
        insecure = token is None and not has_keys(service)
    app = create_app(
        service,
        token=token,
        max_body_bytes=max_body_bytes,
        large_body_budget=large_body_budget,
        public_docs=public_docs,
        insecure=insecure,
        quotas=quotas,
        allowed_hosts=allowed_hosts,
    )
    sock = socket.create_server(("127.0.0.1", 0))
    server = Server(uvicorn_config(app, limits, log_level="warning", lifespan="on"))
    if servers is not None:
        servers.append(server)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, "the server to start")
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        wait_healthy(url)
        yield url, service
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def has_keys(service) -> bool:
    from portfolio.serve.keys import count_keys

    return service.store is not None and count_keys(service.store) > 0


def start_cli_server(*args: str, env: dict | None = None, insecure: bool | None = None) -> tuple[subprocess.Popen, str]:
    """`portfolio serve --port 0 ARGS` as a subprocess (`benchmarks.bench_service.launch`, its log piped to
    `process.stderr`); returns it and its base URL once every worker is ready. `insecure`
    (default: when neither --token nor PORTFOLIO_TOKEN is given) adds --insecure (the server is on loopback);
    a server whose trace store holds keys is started with `insecure=False`."""
    if insecure is None:
        insecure = "--token" not in args and "PORTFOLIO_TOKEN" not in (env or {}) and "--insecure" not in args
    return launch(["--insecure", *args] if insecure else args, env, stderr=subprocess.PIPE)


def wait_healthy(url: str, timeout: float = 60.0) -> None:
    """Until every planner worker has started."""
    wait_until(lambda: ready(url), timeout, "the server to become healthy", every=0.05)


def wait_for(condition, timeout: float = 30.0, what: str = "condition") -> None:
    """`support.wait_until`, under the name the service tests import."""
    wait_until(condition, timeout, what)


def validated(task_domain: str, task_problem: str, plan: list[str], init=None) -> bool:
    from domains.ground_text import parse_ground_action
    from domains.pddl import parse_task
    from domains.validate import validate_plan

    task = parse_task(task_domain, task_problem, "domain", "problem")
    return validate_plan(task, [parse_ground_action(s) for s in plan], init=init).ok


def over_http(url: str):
    """`call(operation, body) -> answer` over HTTP (httpx); with `over_mcp`, one test runs on both interfaces."""

    def call(name: str, body: dict) -> dict:
        route = {
            "plan": "/v1/plan",
            "replan": "/v1/replan",
            "costs": "/v1/costs",
            "retrain": "/v1/retrain",
            "record_steps": "/v1/steps",
        }[name]
        answer = httpx.post(url + route, json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()

    return call


def over_mcp(url: str):
    """`call(operation, body) -> answer` through the official MCP client (streamable HTTP at /mcp)."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    def call(name: str, body: dict) -> dict:
        async def main() -> dict:
            async with streamable_http_client(url + "/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool(name, body)
                    assert not result.is_error, result.content
                    return result.structured_content

        return anyio.run(main)

    return call


def raw(
    url: str, method: str, path: str, body: bytes | None = None, timeout: float = 30.0, **headers: str
) -> tuple[int, dict, bytes]:
    """One request sent as is (httpx would set Host itself): status, headers, body. A header `x_y` is sent as
    x-y."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name.replace("_", "-"), value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def mcp_record_steps(url: str, steps: list[dict]) -> dict:
    """The MCP `record_steps` tool of the server at `url` (streamable HTTP) called with `steps`: its structured
    answer, once asserted not an error."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with streamable_http_client(url + "/mcp") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("record_steps", {"steps": steps})

    result = anyio.run(main)
    assert not result.is_error, result.content
    return result.structured_content
