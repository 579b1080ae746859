"""The service's browser docs over real HTTP: /docs is Swagger UI with its JavaScript and CSS
served by the service itself (no CDN: a browser offline still renders it), and with a token the docs, the schema
and those assets are public behind `--public-docs` while every /v1 operation still needs the token."""

from __future__ import annotations

import http.client
import json
import re

import httpx
import pytest
from test_service_helpers import config, serve_in_thread, start_cli_server

TOKEN = {"Authorization": "Bearer s3cret"}


def asset_urls(html: str) -> list[str]:
    """Every URL the page loads: scripts, stylesheets, icons (src= and href=)."""
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)


def test_docs_load_swagger_ui_from_the_service_itself_not_a_cdn():
    with serve_in_thread(config()) as (url, _):
        page = httpx.get(url + "/docs", timeout=30)
        assert page.status_code == 200 and "SwaggerUIBundle" in page.text
        urls = asset_urls(page.text)
        assert any(u.endswith(".js") for u in urls) and any(u.endswith(".css") for u in urls), urls
        assert all(u.startswith("/") and not u.startswith("//") for u in urls), urls  # nothing from another host
        assert "url: '/openapi.json'" in page.text  # the schema it renders is the service's own
        for asset in urls:
            answer = httpx.get(url + asset, timeout=30)
            assert answer.status_code == 200 and answer.content, asset
        script = httpx.get(url + next(u for u in urls if u.endswith("swagger-ui-bundle.js")), timeout=30)
        assert "SwaggerUIBundle" in script.text and len(script.content) > 100_000  # the real bundle
        assert script.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
        # Swagger UI 5 or later: FastAPI's schema is OpenAPI 3.1, which Swagger UI 4 refuses to render
        assert httpx.get(url + "/openapi.json", timeout=30).json()["openapi"].startswith("3.1")
        assert re.search(r'version:\s*"5\.|"5\.\d+\.\d+"', script.text)
        # the assets are counted under one bounded route label, not one per file
        metrics = httpx.get(url + "/metrics", timeout=30).text
        assert 'route="/docs/assets",status="200"' in metrics and "swagger-ui.css" not in metrics
        # the contract is the same on an --insecure server, which lets every request in whatever it says
        schema = httpx.get(url + "/openapi.json", timeout=30).json()
        assert schema["paths"]["/v1/plan"]["post"]["security"] == [{"bearer": ["plan"]}]


@pytest.mark.parametrize("public", [True, False], ids=["public-docs", "private"])
def test_with_a_token_docs_are_public_only_behind_the_flag_and_v1_always_needs_the_token(public):
    with serve_in_thread(config(), token="s3cret", public_docs=public) as (url, _):
        page = httpx.get(url + "/docs", headers=TOKEN, timeout=30)
        assets = [u for u in asset_urls(page.text) if u.endswith((".js", ".css"))]
        assert page.status_code == 200 and assets
        expected = 200 if public else 401
        for path in ["/docs", "/openapi.json", *assets]:
            answer = httpx.get(url + path, timeout=30)
            assert answer.status_code == expected, (path, answer.status_code)
        # the operations are never public
        for method, path in [("POST", "/v1/plan"), ("GET", "/v1/actions"), ("GET", "/metrics"), ("POST", "/mcp")]:
            answer = httpx.request(method, url + path, json={}, timeout=30)
            assert answer.status_code == 401 and answer.json()["kind"] == "Unauthorized", path
        # public for reading only (GET and HEAD), and a look-alike path is not public at all
        assert httpx.post(url + "/openapi.json", json={}, timeout=30).status_code == 401
        assert httpx.head(url + "/openapi.json", timeout=30).status_code == expected
        assert httpx.get(url + "/docs-and-more", timeout=30).status_code == 401
        # a path that climbs out of the assets reaches no operation (sent as is: httpx would normalise it)
        host, port = url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        connection.request("GET", "/docs/assets/../../v1/actions")
        climbed = connection.getresponse()
        assert (climbed.status, json.loads(climbed.read())["kind"]) == (
            (404, "NotFound") if public else (401, "Unauthorized")
        )
        connection.close()
        # the schema says which operations need the token, so Swagger UI offers "Authorize" for them
        schema = httpx.get(url + "/openapi.json", headers=TOKEN, timeout=30).json()
        assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert schema["paths"]["/v1/plan"]["post"]["security"] == [{"bearer": ["plan"]}]
        assert "security" not in schema["paths"]["/v1/health"]["get"]


def test_portfolio_serve_public_docs_flag():
    """`portfolio serve --public-docs` with the token in PORTFOLIO_TOKEN, as a user starts it."""
    import signal

    server, url = start_cli_server(
        "--workers", "1", "--delegates", "fast-downward", "--public-docs", env={"PORTFOLIO_TOKEN": "s3cret"}
    )
    try:
        assert httpx.get(url + "/docs", timeout=30).status_code == 200
        assert httpx.get(url + "/openapi.json", timeout=30).status_code == 200
        assert httpx.get(url + "/v1/actions", timeout=30).status_code == 401
        assert httpx.get(url + "/metrics", headers=TOKEN, timeout=30).status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
