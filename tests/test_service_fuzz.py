"""A property-based fuzz of every route in the OpenAPI document (schemathesis, positive and negative cases)
against a real server on loopback with a trace store and the token: no answer is a 5xx, no body holds a
traceback, every request goes over the same keep-alive connection (none dropped), and the server still plans
afterwards. Bounded: a fixed seed (derandomized) and a fixed number of examples."""

from __future__ import annotations

import collections
import os
import time

import httpx
import pytest
from support import poll
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, serve_in_thread, small_plan, validated

# 500 took ~37 s on a loaded 2-core machine (load 7), a tenth of the suite's budget; more for a longer run (the
# issue's benchmark: PORTFOLIO_FUZZ_EXAMPLES=3000)
EXAMPLES = int(os.environ.get("PORTFOLIO_FUZZ_EXAMPLES", "300"))


@pytest.mark.slow
def test_fuzzing_every_route_finds_no_5xx_no_traceback_and_no_dropped_connection(tmp_path):
    import requests
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from schemathesis import GenerationMode

    headers = {"Authorization": "Bearer fuzz"}
    # Short budgets: a generated task that happens to be solvable plans for at most a second or two.
    with serve_in_thread(
        config(
            traces=str(tmp_path / "t.db"), queue=256, validate_budget_s=2.0, max_budget_s=1.0, decomposer_budget_s=0.5
        ),
        token="fuzz",
    ) as (url, svc):
        document = httpx.get(url + "/openapi.json", headers=headers, timeout=30).json()
        schema = schemathesis.openapi.from_dict(document)
        cases = st.one_of(schema.as_strategy(GenerationMode.POSITIVE), schema.as_strategy(GenerationMode.NEGATIVE))
        session = requests.Session()
        statuses: collections.Counter = collections.Counter()
        failures: list[str] = []

        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=cases)
        def fuzz(case) -> None:
            began = time.monotonic()
            response = case.call(base_url=url, session=session, headers=headers, timeout=60)
            if time.monotonic() - began > 1 or os.environ.get("FUZZ_TRACE"):
                print(
                    f"{time.monotonic() - began:.2f} s {case.method} {case.path} {str(case.body)[:200]} -> "
                    f"{response.status_code} {response.text[:200]}",
                    flush=True,
                )
            statuses[response.status_code] += 1
            if response.status_code >= 500 or "Traceback" in response.text:
                failures.append(f"{case.method} {case.path} -> {response.status_code}: {response.text[:300]}")

        started = time.monotonic()
        fuzz()
        elapsed = time.monotonic() - started
        pools = session.get_adapter(url).poolmanager.pools
        connections = sum(pools[key].num_connections for key in pools.keys())
        session.close()
        print(
            f"fuzz: {sum(statuses.values())} requests in {elapsed:.1f} s over {connections} connection: "
            f"{dict(sorted(statuses.items()))}",
            flush=True,
        )
        assert not failures, failures[:5]
        # one connection made for the whole run: the server never dropped it (an answer is never a reason to)
        assert sum(statuses.values()) >= EXAMPLES and connections == 1, (statuses, connections)
        assert httpx.get(url + "/v1/health", timeout=5).status_code == 200  # at once, whatever is still queued
        # Generated `"wait": false` plans and retrains run as background jobs (up to the queue limit): let them
        # finish, then the server must plan as it did before the fuzz.
        poll(lambda: [j for j in list(svc.jobs.values()) if j.status == "running"], lambda left: not left, 300, 0.5)
        answer = httpx.post(url + "/v1/plan", json=small_plan(), headers=headers, timeout=60).json()
        assert answer["status"] == "solved" and validated(BLOCKS_DOMAIN, BLOCKS_4, answer["plan"])
