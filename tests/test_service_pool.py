"""The service under contention and failure, over real HTTP: the worker pool, the bounded queue, a killed worker,
memory caps, auth, body limits, SIGTERM and kill -9."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time

import httpx
import psutil
import pytest
from test_service_helpers import (
    BLOCKS_4,
    BLOCKS_DOMAIN,
    BOOM_DOMAIN,
    boom_problem,
    config,
    long_plan,
    serve_in_thread,
    small_plan,
    start_cli_server,
    validated,
    wait_for,
)

from portfolio.serve.pool import default_workers


def planning(worker: int) -> bool:
    """Whether a Python process below `worker` (its translator or pyperplan worker, not an idle pre-started
    search) is running: the worker is planning."""
    try:
        below = psutil.Process(worker).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    busy = []
    for process in below:
        try:
            busy.append(process.status() == psutil.STATUS_RUNNING and "python" in process.name())
        except psutil.Error:  # ended meanwhile
            pass
    return any(busy)


def running(processes: list[psutil.Process]) -> list[int]:
    """The pids still running. A zombie has ended: orphans wait for PID 1 to reap them, which here is slow."""
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.mark.slow
def test_a_small_request_is_not_held_up_by_a_large_one_while_a_worker_is_free():
    with serve_in_thread(config(workers=2)) as (url, _), concurrent.futures.ThreadPoolExecutor(2) as pool:
        httpx.post(url + "/v1/plan", json=small_plan(), timeout=60)  # both workers warm up meanwhile
        large = pool.submit(httpx.post, url + "/v1/plan", json=long_plan(4.0), timeout=60)
        wait_for(lambda: httpx.get(url + "/v1/health").json()["busy"] == 1, what="the large request to start")
        small = httpx.post(url + "/v1/plan", json=small_plan(), timeout=60)
        assert small.status_code == 200 and small.json()["status"] == "solved"
        assert not large.done(), "the small request waited for the large one"
        assert large.result().json()["status"] == "timeout"


def test_a_full_queue_answers_503_with_retry_after_and_budgets_are_capped():
    with (
        serve_in_thread(config(workers=1, queue=1, max_budget_s=3.0)) as (url, svc),
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        # capped at 3 s, it times out; uncapped, its 100 s would outlast the 60 s this client waits (ReadTimeout)
        large = pool.submit(httpx.post, url + "/v1/plan", json=long_plan(100.0), timeout=60)
        wait_for(lambda: svc.pool.busy == 1, what="the worker to be busy")
        # (a generous budget: the translator killed at the large request's deadline restarts cold)
        queued = pool.submit(httpx.post, url + "/v1/plan", json={**small_plan(), "budget": 3.0}, timeout=60)
        wait_for(lambda: svc.pool.queued == 1, what="a request to queue")
        refused = httpx.post(url + "/v1/plan", json=small_plan(), timeout=60)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["kind"] == "QueueFull"
        assert large.result().json()["status"] == "timeout"
        assert queued.result().json()["status"] == "solved"  # the queued one was served, not dropped
        metrics = httpx.get(url + "/metrics").text
        assert 'portfolio_cascade_fallthroughs_total{delegate="fast-downward",status="timeout"} 1.0' in metrics
        assert 'portfolio_requests_total{route="/v1/plan",status="503"} 1.0' in metrics


def test_a_killed_worker_is_answered_500_with_the_reason_and_replaced():
    with serve_in_thread(config(workers=1)) as (url, svc), concurrent.futures.ThreadPoolExecutor(1) as pool:
        httpx.post(url + "/v1/plan", json=small_plan(), timeout=60)
        pending = pool.submit(httpx.post, url + "/v1/plan", json=long_plan(20.0), timeout=60)
        wait_for(lambda: svc.pool.busy == 1, what="the worker to be busy")
        # busy counts from when the pool hands the request a worker, a moment before the request is sent; a worker
        # found dead then is restarted and the request served (200: what a worker that died between requests
        # should get, and what a CI run got when the kill landed in that moment). Kill once it is planning.
        wait_for(lambda: svc.pool.workers[0]._lock.locked(), what="the request to reach the worker")
        victim = svc.pool.workers[0].pid
        wait_for(lambda: planning(victim), what="the worker's translator or pyperplan worker at work")
        children = psutil.Process(victim).children(recursive=True)
        os.kill(victim, signal.SIGKILL)
        answer = pending.result()
        assert answer.status_code == 500 and answer.json()["kind"] == "PlannerFailed"
        assert "died" in answer.json()["error"] and "replaced" in answer.json()["error"]
        # its translator and search processes went with it (parent-death signal), none left behind
        psutil.wait_procs(children, timeout=5)
        assert not running(children)
        after = httpx.post(url + "/v1/plan", json=small_plan(), timeout=60)
        assert after.status_code == 200 and validated(BLOCKS_DOMAIN, BLOCKS_4, after.json()["plan"])
        assert svc.pool.workers[0].pid != victim
        assert 'portfolio_worker_restarts_total{reason="died"} 1.0' in httpx.get(url + "/metrics").text


@pytest.mark.slow
def test_a_task_whose_grounding_exceeds_the_memory_limit_is_an_out_of_memory_attempt():
    # a generous budget: on a loaded machine the grounding must reach the cap before the budget runs out
    # 150 MB for each of the worker's four planner processes (`portfolio.engine.limits.tree_share_mb`)
    with serve_in_thread(config(workers=1, memory_limit_mb=600, fd_workers=1, budget_s=60.0, max_budget_s=60.0)) as (
        url,
        _,
    ):
        answer = httpx.post(url + "/v1/plan", json={"domain": BOOM_DOMAIN, "problem": boom_problem()}, timeout=120)
        assert answer.status_code == 200
        result = answer.json()
        reasons = {a["delegate"]: (a["status"], a["reason"]) for a in result["attempts"]}
        assert reasons["fast-downward"][0] == "memout" and "out of memory" in reasons["fast-downward"][1]
        assert "pyperplan" in reasons, "the cascade went on after the out-of-memory attempt"
        after = httpx.post(url + "/v1/plan", json=small_plan(), timeout=60).json()  # replaced workers plan again
        assert after["status"] == "solved" and after["attempts"][0]["delegate"] == "fast-downward"


def test_the_token_guards_every_route_but_health_and_the_body_size_is_limited():
    with serve_in_thread(config(), token="s3cret", max_body_bytes=64 * 1024) as (url, _):
        good = {"Authorization": "Bearer s3cret"}
        assert httpx.get(url + "/v1/health").status_code == 200
        for method, path in [
            ("POST", "/v1/plan"),
            ("POST", "/v1/steps"),
            ("GET", "/v1/actions"),
            ("GET", "/metrics"),
            ("GET", "/openapi.json"),
            ("POST", "/mcp"),
        ]:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                answer = httpx.request(method, url + path, json={}, headers=headers)
                assert answer.status_code == 401, (path, headers)
                assert answer.json()["kind"] == "Unauthorized"
        assert httpx.post(url + "/v1/plan", json=small_plan(), headers=good, timeout=60).status_code == 200
        big = {"domain": BLOCKS_DOMAIN + " " * 70_000, "problem": BLOCKS_4}
        assert httpx.post(url + "/v1/plan", json=big, headers=good).status_code == 413

        def chunks():  # no Content-Length: the limit is enforced while the body streams in
            yield b'{"domain": "'
            for _ in range(100):
                yield b" " * 1024

        streamed = httpx.post(url + "/v1/plan", content=chunks(), headers={**good, "Content-Type": "application/json"})
        assert streamed.status_code == 413 and streamed.json()["kind"] == "BodyTooLarge"


@pytest.mark.serial  # asserts the exit within 5 s
@pytest.mark.slow
def test_sigterm_drains_stops_every_process_and_exits_0_within_5_s(tmp_path):
    server, url = start_cli_server(
        "--workers", "2", "--drain", "2", "--delegates", "fast-downward,pyperplan", "--traces", str(tmp_path / "t.db")
    )
    try:
        httpx.post(url + "/v1/plan", json=small_plan(), timeout=60)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(httpx.post, url + "/v1/plan", json=long_plan(1.5), timeout=60)
            wait_for(lambda: httpx.get(url + "/v1/health").json()["busy"] == 1, what="a request in flight")
            family = psutil.Process(server.pid).children(recursive=True)
            assert len(family) >= 2 + 2 * 2  # two workers, each with translator and pyperplan workers
            start = time.monotonic()
            server.send_signal(signal.SIGTERM)
            code = server.wait(timeout=10)
            took = time.monotonic() - start
            drained = pending.result()
        assert code == 0 and took <= 5.0, (code, took)
        assert drained.status_code == 200 and drained.json()["status"] == "timeout"  # in flight: finished
        psutil.wait_procs(family, timeout=1)
        assert not running(family)
    finally:
        if server.poll() is None:
            server.kill()


@pytest.mark.slow
def test_steps_posted_before_kill_9_are_in_the_store_after_restart(tmp_path):
    from traces.store import TraceStore

    db = tmp_path / "traces.db"
    server, url = start_cli_server("--workers", "1", "--delegates", "fast-downward", "--traces", str(db))
    try:
        for batch in range(10):
            steps = [{"run_id": f"r{batch}", "step": i, "action": "drive", "outcome": "success"} for i in range(50)]
            assert httpx.post(url + "/v1/steps", json={"steps": steps}, timeout=30).json()["recorded"] == 50
        family = psutil.Process(server.pid).children(recursive=True)
        server.kill()
        server.wait(timeout=10)
        psutil.wait_procs(family, timeout=5)  # the workers follow the server (parent-death signal)
        assert not running(family)
    finally:
        if server.poll() is None:
            server.kill()
    with TraceStore(db) as store:  # what a restarted server reads
        assert store.count_steps("drive") == 500
        assert {row.action: row.steps for row in store.stats()} == {"drive": 500}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "0"], "--workers"),
        (["--delegates", "fast-downward,nope"], "unknown delegate"),
        (["--max-budget", "-1"], "--max-budget"),
    ],
)
def test_bad_options_exit_2_with_a_message(args, message, capsys):
    from portfolio.cli import main

    try:
        code = main(["serve", "--port", "0", *args])
    except SystemExit as refused:  # argparse's own refusal: the option's type (a budget is finite and > 0)
        code = refused.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_worker_that_does_not_answer_in_time_is_replaced_and_the_call_fails_with_the_reason():
    """The pool's own deadline (budgets + grace) is what keeps a hung worker from hanging its request."""
    import asyncio

    from portfolio.serve.pool import PlannerFailed, PlannerPool
    from portfolio.serve.worker import WorkerConfig

    restarts: list[str] = []
    worker = WorkerConfig(delegates=["fast-downward"], budget_s=20.0, decomposer_budget_s=1.0, memory_limit_mb=4096)
    pool = PlannerPool(worker, size=1, queue_limit=0, on_restart=restarts.append)

    async def scenario() -> tuple[str, dict]:
        await pool.warm_up()
        first = pool.workers[0].pid
        with pytest.raises(PlannerFailed) as failed:
            await pool.call("plan", 1.0, body=long_plan(20.0))  # the worker would take 20 s: 1 s allowed
        assert pool.workers[0].pid != first and pool.busy == 0
        _, answer = await pool.call("plan", 60.0, body=small_plan())
        return str(failed.value), answer

    try:
        message, answer = asyncio.run(scenario())
    finally:
        pool.close()
    assert "did not answer within 1 s" in message and "replaced" in message
    assert restarts == ["timeout"] and answer["result"]["status"] == "solved"


def test_a_replacement_worker_s_start_up_is_not_charged_to_the_next_request():
    """A validator replaced after a timeout starts a new interpreter (imports included); the next request's budget
    must count its own work only. Before, a trivial validation with a 0.3 s budget right after a replacement was
    refused as too costly: the start-up alone takes longer (under load, longer than the service's 1 s)."""
    import asyncio

    from portfolio.serve.pool import CallTimedOut, PlannerPool
    from portfolio.serve.validator import ValidatorConfig, ValidatorWorker

    pool = PlannerPool(
        ValidatorConfig(memory_limit_mb=1024), size=1, queue_limit=0, worker_class=ValidatorWorker, name="validator"
    )
    body = {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4, "plan": ["(pick-up b)"]}

    async def scenario() -> dict:
        await pool.warm_up()
        pool.workers[0].spawn()  # as `_restarted` leaves it: a new process that has not answered yet
        _, answer = await pool.call("validate", 0.3, body=body, budget_s=0.3, memory_limit_mb=1024)
        return {"answer": answer}

    try:
        outcome = asyncio.run(scenario())
    except CallTimedOut as error:
        raise AssertionError(f"the replacement's start-up was charged to the request: {error}") from None
    finally:
        pool.close()
    assert outcome["answer"]["result"]["valid"] is False


def test_workers_share_the_disk_translation_cache_and_race_no_more_searches_than_their_cores(tmp_path):
    cache = tmp_path / "cache"
    with serve_in_thread(config(workers=2, cache_dir=str(cache))) as (url, service):
        # two workers on the cores this process has: each races cores // 2 searches (at least one), so the
        # pool never puts two searches of one request on a core another worker is planning on
        assert service.pool.config.fd_workers == max(1, default_workers() // 2)
        first = httpx.post(f"{url}/v1/plan", json=small_plan(), timeout=60).json()
        assert first["status"] == "solved" and validated(BLOCKS_DOMAIN, BLOCKS_4, first["plan"])
        assert list(cache.glob("*")), "the worker wrote its translation to the shared cache"
    # a new server (new workers, nothing warm) reads the translation from disk instead of translating again
    with serve_in_thread(config(workers=1, cache_dir=str(cache))) as (url, _):
        again = httpx.post(f"{url}/v1/plan", json=small_plan(), timeout=60).json()
    fd = [a for a in again["attempts"] if a["delegate"] == "fast-downward"]
    assert fd and fd[0]["details"]["translation"] == "disk"
    assert validated(BLOCKS_DOMAIN, BLOCKS_4, again["plan"])
