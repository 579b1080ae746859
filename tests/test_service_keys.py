"""API keys from the command line to a running server: `portfolio keys add` prints the key once and nothing else
shows it again, `list` shows names, tenants and scopes but never a key or its hash, `revoke` stops a key on a
running server within about a second; and `portfolio serve` fails closed: without a key it does not start (exit 2,
saying what to do), --insecure only on loopback, an empty token is an error."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from support import portfolio
from test_service_helpers import config, serve_in_thread, small_plan, start_cli_server, wait_for


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_add_prints_the_key_once_list_never_shows_a_secret_and_the_store_keeps_only_the_hash(store_target):
    from portfolio.serve.keys import hash_key
    from traces.store import TraceStore

    db = store_target
    added = portfolio("keys", "add", "agent-a", "--tenant", "acme", "--scopes", "plan,steps:write", "--traces", db)
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip()
    assert added.stdout == key + "\n" and key.startswith("ppk_") and len(key) >= 40  # the key alone on stdout
    assert key not in added.stderr and "once" in added.stderr
    other = portfolio("keys", "add", "ops", "--tenant", "acme", "--scopes", "metrics", "--rps", "5", "--traces", db)
    assert other.returncode == 0 and other.stdout.strip() != key

    table = portfolio("keys", "list", "--traces", db)
    listed = portfolio("keys", "list", "--json", "--traces", db)
    for shown in (table, listed):
        assert shown.returncode == 0, shown.stderr
        assert "ppk_" not in shown.stdout + shown.stderr and hash_key(key) not in shown.stdout
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["agent-a"]["tenant"] == "acme" and rows["agent-a"]["scopes"] == ["plan", "steps:write"]
    assert rows["ops"]["rps"] == 5 and rows["agent-a"]["last_used"] is None
    assert "agent-a" in table.stdout and "acme" in table.stdout and "never" in table.stdout

    with TraceStore(db) as store:
        stored = [tuple(r) for r in store.db.execute("SELECT * FROM api_keys").fetchall()]
    assert hash_key(key) in str(stored) and key not in str(stored)


@pytest.mark.parametrize(
    "args, message",
    [
        (["agent-a", "--tenant", "acme", "--scopes", "plan"], "exists already"),
        (["b", "--tenant", "Acme!", "--scopes", "plan"], "tenant 'Acme!'"),
        (["b", "--tenant", "acme", "--scopes", "plan,everything"], "unknown scope 'everything'"),
        (["b c", "--tenant", "acme", "--scopes", "plan"], "key name 'b c'"),
        (["b", "--tenant", "acme", "--scopes", "plan", "--rps", "0"], "--rps 0"),
    ],
)
def test_bad_key_input_is_exit_2_with_a_message(tmp_path, args, message, capsys):
    from portfolio.cli import main

    db = str(tmp_path / "t.db")
    assert main(["keys", "add", "agent-a", "--tenant", "acme", "--scopes", "plan", "--traces", db]) == 0
    capsys.readouterr()
    assert main(["keys", "add", *args, "--traces", db]) == 2
    assert message in capsys.readouterr().err
    assert main(["keys", "revoke", "nobody", "--traces", db]) == 2
    error = capsys.readouterr().err
    assert "no key named 'nobody'" in error and "agent-a" in error
    assert main(["keys", "list", "--traces", str(tmp_path / "typo.db")]) == 2
    assert "no trace store there" in capsys.readouterr().err


@pytest.mark.serial  # asserts the revoked key is refused within 2.5 s
def test_a_key_works_at_once_and_a_revoked_one_stops_within_a_second_without_a_restart(tmp_path):
    """`portfolio serve` and `portfolio keys` as users run them, on one trace store."""
    db = str(tmp_path / "t.db")
    first = portfolio("keys", "add", "first", "--tenant", "acme", "--scopes", "read", "--traces", db).stdout.strip()
    server, url = start_cli_server("--workers", "1", "--delegates", "fast-downward", "--traces", db, insecure=False)
    try:
        assert httpx.get(url + "/v1/actions", headers=bearer(first), timeout=30).status_code == 200
        later = portfolio("keys", "add", "later", "--tenant", "acme", "--scopes", "read", "--traces", db).stdout.strip()
        assert httpx.get(url + "/v1/actions", headers=bearer(later), timeout=30).status_code == 200
        listed = {row["name"]: row for row in json.loads(portfolio("keys", "list", "--json", "--traces", db).stdout)}
        assert listed["first"]["last_used"] is not None  # noted by the server

        assert portfolio("keys", "revoke", "later", "--traces", db).returncode == 0
        revoked = time.monotonic()
        wait_for(
            lambda: httpx.get(url + "/v1/actions", headers=bearer(later), timeout=30).status_code == 401,
            timeout=5,
            what="the revoked key to be refused",
        )
        assert time.monotonic() - revoked < 2.5  # the cache holds a key for 1 s; the rest is the round trips
        assert httpx.get(url + "/v1/actions", headers=bearer(first), timeout=30).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=15)


def test_serve_refuses_to_start_without_a_key(tmp_path, capsys, monkeypatch):
    from portfolio.cli import main
    from portfolio.serve.service import Service

    def start(service):
        raise AssertionError("a worker was started before the credentials were checked")

    monkeypatch.delenv("PORTFOLIO_TOKEN", raising=False)
    monkeypatch.delenv("PORTFOLIO_TRACES", raising=False)
    monkeypatch.setattr(Service, "start", start)  # refused before any worker starts
    assert main(["serve", "--workers", "1", "--port", "0"]) == 2
    error = capsys.readouterr().err
    assert "no way to tell its callers apart" in error and "portfolio keys add" in error and "--insecure" in error
    # a trace store without keys is no better
    assert main(["serve", "--workers", "1", "--port", "0", "--traces", str(tmp_path / "t.db")]) == 2
    assert "its trace store holds no API key" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--insecure", "--host", "0.0.0.0"], {}, "allowed on a loopback address only"),
        (["--token", ""], {}, "an empty token"),
        ([], {"PORTFOLIO_TOKEN": ""}, "an empty token"),
        (["--insecure", "--token", "t"], {}, "--insecure would ignore the server's token"),
        (["--rps", "0"], {"PORTFOLIO_TOKEN": "t"}, "--rps: Input should be greater than 0"),
    ],
    ids=["insecure-on-all-interfaces", "empty-token", "empty-token-variable", "insecure-with-token", "rps-0"],
)
def test_serve_fails_closed_with_exit_2_and_what_to_do(args, env, message, capsys, monkeypatch):
    from portfolio.cli import main

    monkeypatch.delenv("PORTFOLIO_TOKEN", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--workers", "1", "--port", "0", *args]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def test_insecure_with_keys_in_the_store_is_refused(tmp_path, capsys, monkeypatch):
    from portfolio.cli import main

    monkeypatch.delenv("PORTFOLIO_TOKEN", raising=False)
    db = str(tmp_path / "t.db")
    assert main(["keys", "add", "a", "--tenant", "acme", "--scopes", "plan", "--traces", db]) == 0
    capsys.readouterr()
    assert main(["serve", "--workers", "1", "--port", "0", "--insecure", "--traces", db]) == 2
    assert "--insecure would ignore the server's 1 API keys" in capsys.readouterr().err


def test_a_server_on_all_interfaces_says_which_hosts_it_answers(tmp_path):
    """With a key and --host 0.0.0.0 it starts, and warns that it is reachable from elsewhere."""
    db = str(tmp_path / "t.db")
    key = portfolio("keys", "add", "a", "--tenant", "acme", "--scopes", "read", "--traces", db).stdout.strip()
    server, url = start_cli_server(
        "--host", "0.0.0.0", "--workers", "1", "--delegates", "fast-downward", "--traces", db, insecure=False
    )
    try:
        url = url.replace("0.0.0.0", "127.0.0.1")
        assert httpx.get(url + "/v1/actions", headers=bearer(key), timeout=30).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=15)
    assert server.stderr is not None
    warning = server.stderr.read()
    assert "reachable from other machines" in warning and "--allowed-host" in warning


def test_unauthenticated_requests_are_refused_before_their_body_is_read():
    """The Guard reads the key from the header first: a request announcing a 30 MB body, of which nothing is
    sent, is answered 401 at once (the body is never waited for)."""
    with serve_in_thread(config(), token="s3cret") as (url, _):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(
                b"POST /v1/steps HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 30000000\r\n\r\n"
            )
            head = connection.recv(4096)
        assert head.startswith(b"HTTP/1.1 401"), head  # with none of the body sent: it was not waited for
        # with the token, the same request is admitted and its body awaited (nothing comes back meanwhile)
        with socket.create_connection((host, int(port)), timeout=1) as connection:
            connection.sendall(
                b"POST /v1/steps HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\n"
                b"Content-Type: application/json\r\nContent-Length: 30000000\r\n\r\n"
            )
            with pytest.raises(TimeoutError):
                connection.recv(4096)


def test_the_token_is_one_admin_of_the_default_tenant_beside_the_keys(tmp_path):
    from portfolio.serve.keys import add_key
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        key = add_key(store, "a", "acme", "plan")
    with serve_in_thread(config(traces=db), token="tok") as (url, _):
        assert httpx.post(url + "/v1/plan", json=small_plan(), headers=bearer(key), timeout=60).status_code == 200
        token_plan = httpx.post(
            url + "/v1/plan", json={**small_plan(), "run_id": "t1"}, headers=bearer("tok"), timeout=60
        )
        assert token_plan.status_code == 200 and token_plan.json()["run_id"] == "t1"
        assert httpx.get(url + "/metrics", headers=bearer("tok"), timeout=30).status_code == 200  # admin: every scope
        assert httpx.get(url + "/metrics", headers=bearer(key), timeout=30).status_code == 403
        with TraceStore(db) as store:
            runs = {row[0] for row in store.db.execute("SELECT run_id FROM run_tasks").fetchall()}
        assert "t1" in runs  # the default tenant's run ids are stored as they are
        assert any(r.startswith("@acme/") for r in runs)


def test_a_key_store_that_cannot_be_read_is_503_with_retry_after_not_a_500(tmp_path, monkeypatch):
    import traces.keys
    from portfolio.serve.keys import add_key
    from traces.errors import DatabaseLockedError
    from traces.store import TraceStore

    db = str(tmp_path / "t.db")
    with TraceStore(db) as store:
        key = add_key(store, "a", "acme", "read")
    with serve_in_thread(config(traces=db)) as (url, _):

        def locked(store, digest):
            raise DatabaseLockedError("database still locked by another writer after 10 retries")

        monkeypatch.setattr(traces.keys, "key_by_hash", locked)
        answer = httpx.get(url + "/v1/actions", headers=bearer(key), timeout=30)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert answer.json()["kind"] == "DatabaseLockedError"
        monkeypatch.undo()
        assert httpx.get(url + "/v1/actions", headers=bearer(key), timeout=30).status_code == 200
