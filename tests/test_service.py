"""The HTTP/JSON service over real HTTP on 127.0.0.1: plans, bad input as 400s, step recording."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from conftest import IPC
from domains.load import load_task
from domains.validate import validate_plan
from portfolio.planner import Planner
from portfolio.results import parse_ground_action
from portfolio.serve.http import make_server


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    planner = Planner(traces=tmp_path_factory.mktemp("svc") / "traces.db")
    server = make_server(planner, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", planner
    server.shutdown()
    server.server_close()
    planner.close()


def post(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_plan_pddl_texts_and_from_another_state(service):
    url, _ = service
    domain, problem = IPC / "blocks" / "domain.pddl", IPC / "blocks" / "probBLOCKS-4-0.pddl"
    status, result = post(url + "/v1/plan", {"domain": domain.read_text(), "problem": problem.read_text()})
    assert status == 200 and result["status"] == "solved"
    task = load_task(domain, problem)
    plan = [parse_ground_action(step) for step in result["plan"]]
    assert validate_plan(task, plan).ok
    init = ["(clear a)", "(on a b)", "(ontable b)", "(clear c)", "(ontable c)", "(clear d)", "(ontable d)",
            "(handempty)"]
    status, replan = post(url + "/v1/plan", {"domain": domain.read_text(), "problem": problem.read_text(),
                                             "init": init})
    assert status == 200 and replan["status"] == "solved"
    from domains.model import Atom

    state = frozenset(Atom(a.strip("()").split()[0], tuple(a.strip("()").split()[1:])) for a in init)
    assert validate_plan(task, [parse_ground_action(s) for s in replan["plan"]], init=state).ok


def test_plan_json_task(service):
    url, _ = service
    task = json.loads(open("domains/examples/blocks-task.json").read())
    status, result = post(url + "/v1/plan", {"task": task})
    assert status == 200 and result["status"] == "solved"


@pytest.mark.parametrize("body, kind", [
    (b"{not json", "BadRequest"),
    ({"domain": "(define (domain d)", "problem": "(define (problem p))"}, "PDDLSyntaxError"),
    ({"task": {"objects": 3}}, "SchemaError"),
    ({}, "BadRequest"),
    ({"domain": (IPC / "blocks" / "domain.pddl").read_text(),
      "problem": (IPC / "blocks" / "probBLOCKS-4-0.pddl").read_text(), "init": ["(floating a)"]},
     "UndefinedSymbolError"),
])
def test_bad_input_is_a_400_with_a_message_and_kind(service, body, kind):
    url, _ = service
    status, payload = post(url + "/v1/plan", body)
    assert status == 400
    assert payload["kind"] == kind and payload["error"]


def test_steps_are_recorded_in_the_trace_store(service):
    url, planner = service
    steps = [{"run_id": "svc", "step": i, "action": "drive", "args": ["t1", "a", "b"], "outcome": "success"}
             for i in range(3)]
    status, payload = post(url + "/v1/steps", {"steps": steps})
    assert status == 200 and payload == {"recorded": 3}
    assert planner.store.count_steps("drive") == 3
    status, payload = post(url + "/v1/steps", {"steps": [{"run_id": "svc"}]})
    assert status == 400 and payload["kind"] == "SchemaError"
