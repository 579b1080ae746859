"""Runs the service follows: a replan keeps what is still valid of the run's plan after the steps recorded as run,
and never hands back a step that ran. Typed tool actions do not consume their inputs, so once a few steps have
run the whole plan is valid again from the state they reached, and reusing the longest valid suffix alone would
send the email, get the approval and book the flight again. Over HTTP (httpx) and MCP (the official client),
through a real server; after a restart on the same trace store; and against the Python `Agent` on the same run."""

from __future__ import annotations

import httpx
import pytest
from test_service_helpers import config, over_http, over_mcp, serve_in_thread

from domains.typed_actions import action, compile_actions
from portfolio.planner import REUSE_DELEGATE
from traces import StepRecord


class ApprovalEmail:
    pass


class Approval:
    pass


class Booking:
    pass


class Charge:
    pass


SENT: list[str] = []  # what the Agent's actions did, for the side effects the test counts
FLAKY = {"book-flight": 0}  # failures still to come, by action


@action(side_effects=True)
def send_approval_email() -> ApprovalEmail:
    SENT.append("email")
    return ApprovalEmail()


@action
def receive_approval(email: ApprovalEmail) -> Approval:
    return Approval()


@action
def book_flight(approval: Approval) -> Booking:
    if FLAKY["book-flight"]:
        FLAKY["book-flight"] -= 1
        raise TimeoutError("the airline did not answer")
    return Booking()


@action(side_effects=True, goal=True)
def charge_card(booking: Booking) -> Charge:
    SENT.append("charge")
    return Charge()


TRIP = [send_approval_email, receive_approval, book_flight, charge_card]
TRIP_TASK = compile_actions(TRIP, [Charge])
TRIP_BODY = {"domain": TRIP_TASK.domain_pddl, "problem": TRIP_TASK.problem_pddl}
TRIP_PLAN = ["(send-approval-email)", "(receive-approval)", "(book-flight)", "(charge-card)"]

# A deploy pipeline of 18 steps (for each of 2 services build, test, push, deploy and verify on staging, then on
# prod; 2 migrations, a checkout, an announcement) that, like typed actions, consumes nothing: every fact a step
# needs stays true.
SERVICE = [{"name": "?s", "type": "service"}]


def stage(name: str, needs: list[str], makes: str, each: bool = True) -> dict:
    return {"name": name, "parameters": SERVICE if each else [], "preconditions": needs, "add": [makes]}


DEPLOY = {
    "types": [{"name": "service"}],
    "objects": [{"name": "api", "type": "service"}, {"name": "web", "type": "service"}],
    "predicates": [
        *({"name": name} for name in ("checked-out", "staging-migrated", "prod-migrated", "announced")),
        *({"name": name, "parameters": ["service"]} for name in ("built", "tested", "pushed")),
        *({"name": name, "parameters": ["service"]} for name in ("on-staging", "staging-ok", "on-prod", "prod-ok")),
    ],
    "actions": [
        stage("checkout", [], "(checked-out)", each=False),
        stage("build", ["(checked-out)"], "(built ?s)"),
        stage("test", ["(built ?s)"], "(tested ?s)"),
        stage("push", ["(tested ?s)"], "(pushed ?s)"),
        stage("migrate-staging", ["(checked-out)"], "(staging-migrated)", each=False),
        stage("deploy-staging", ["(pushed ?s)", "(staging-migrated)"], "(on-staging ?s)"),
        stage("verify-staging", ["(on-staging ?s)"], "(staging-ok ?s)"),
        stage("migrate-prod", ["(forall (?x - service) (staging-ok ?x))"], "(prod-migrated)", each=False),
        stage("deploy-prod", ["(staging-ok ?s)", "(prod-migrated)"], "(on-prod ?s)"),
        stage("verify-prod", ["(on-prod ?s)"], "(prod-ok ?s)"),
        stage("announce", ["(forall (?x - service) (prod-ok ?x))"], "(announced)", each=False),
    ],
    "goal": ["(announced)"],
}


def deploy_task():
    import json

    from domains.json_task import task_from_json

    return task_from_json(json.dumps(DEPLOY), "deploy.json")


def state_after(task, steps: list[str], start=None) -> list[str]:
    from domains.ground_text import parse_ground_action
    from domains.validate import apply

    state = task.problem.init if start is None else start
    for step in steps:
        state = apply(task, state, parse_ground_action(step))
    return sorted(str(atom) for atom in state)


def valid_from(task, plan: list[str], state: list[str]) -> bool:
    from domains.ground_text import parse_ground_action
    from domains.literals import parse_ground_atoms
    from domains.validate import validate_plan

    return validate_plan(task, [parse_ground_action(s) for s in plan], init=parse_ground_atoms(task, state)).ok


def recorded(run_id: str, plan: list[str], outcomes: list[str], **fields) -> list[dict]:
    return [
        {"run_id": run_id, "step": i, "action": step, "outcome": outcome, **fields}
        for i, (step, outcome) in enumerate(zip(plan, outcomes))
    ]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with serve_in_thread(config(traces=str(tmp_path_factory.mktemp("runs") / "t.db"))) as (base, _):
        yield base


INTERFACES = pytest.mark.parametrize("interface", [over_http, over_mcp], ids=["http", "mcp"])


@INTERFACES
def test_a_replan_after_recorded_steps_hands_back_only_the_steps_that_did_not_run(url, interface):
    call = interface(url)
    run = f"trip-{interface.__name__}"
    first = call("plan", TRIP_BODY | {"run_id": run})
    assert first["plan"] == TRIP_PLAN and valid_from(TRIP_TASK, first["plan"], state_after(TRIP_TASK, []))
    assert call("record_steps", {"steps": recorded(run, TRIP_PLAN[:3], ["success"] * 3)})["recorded"] == 3
    state = state_after(TRIP_TASK, TRIP_PLAN[:3])
    assert valid_from(TRIP_TASK, TRIP_PLAN, state)  # the premise: the whole plan is valid again from here
    again = call("replan", {"run_id": run, "state": state})
    assert again["delegate"] == REUSE_DELEGATE and again["plan"] == ["(charge-card)"], again["attempts"]
    assert valid_from(TRIP_TASK, again["plan"], state)
    # the kept plan is now the rest: a further replan from the same state keeps it, and the recorded steps,
    # numbered before it, are not matched against it
    assert call("replan", {"run_id": run, "state": state})["plan"] == ["(charge-card)"]


@INTERFACES
def test_an_18_step_pipeline_after_8_recorded_steps_gets_only_its_last_10(url, interface):
    call, task = interface(url), deploy_task()
    run = f"deploy-{interface.__name__}"
    first = call("plan", {"task": DEPLOY, "run_id": run})
    plan = first["plan"]
    assert first["status"] == "solved" and len(plan) == 18 and valid_from(task, plan, state_after(task, []))
    assert call("record_steps", {"steps": recorded(run, plan[:8], ["success"] * 8)})["recorded"] == 8
    state = state_after(task, plan[:8])
    assert valid_from(task, plan, state)  # nothing consumed: all 18 are valid again, 8 of them done
    again = call("replan", {"run_id": run, "state": state})
    assert again["delegate"] == REUSE_DELEGATE and again["plan"] == plan[8:]
    assert valid_from(task, again["plan"], state)


def test_a_step_that_failed_may_be_kept_unless_it_left_side_effects(url):
    """A failure without side effects did not run: the plan from it on is kept (a retry). One that changed the
    world is behind the executed prefix, so what is kept starts after it, and here that no longer holds: planned
    anew, from the observed state."""
    call = over_http(url)
    for run, side_effects in (("failed-clean", False), ("failed-dirty", True)):
        call("plan", TRIP_BODY | {"run_id": run})
        steps = recorded(run, TRIP_PLAN[:3], ["success", "success", "failure"])
        steps[2]["side_effects"] = side_effects
        call("record_steps", {"steps": steps})
        state = state_after(TRIP_TASK, TRIP_PLAN[:2])
        again = call("replan", {"run_id": run, "state": state})
        assert valid_from(TRIP_TASK, again["plan"], state) and again["plan"] == TRIP_PLAN[2:]
        assert (again["delegate"] == REUSE_DELEGATE) is (not side_effects), again["attempts"]


@INTERFACES
def test_a_runtime_keeping_its_own_state_sends_previous_plan_and_executed(url, interface):
    call = interface(url)
    run = f"own-{interface.__name__}"
    call("plan", TRIP_BODY | {"run_id": run})
    state = state_after(TRIP_TASK, TRIP_PLAN[:3])
    # nothing recorded: the runtime says what ran, of the run's plan
    told = call("replan", {"run_id": run, "state": state, "executed": TRIP_PLAN[:3]})
    assert told["delegate"] == REUSE_DELEGATE and told["plan"] == ["(charge-card)"]
    # its own plan, the whole of it with what ran (any spelling of an action), or only the rest of it
    spelled = ["send-approval-email", "(RECEIVE-APPROVAL)", "( book-flight )"]
    whole = call("replan", {"run_id": run, "state": state, "previous_plan": TRIP_PLAN, "executed": spelled})
    rest = call("replan", {"run_id": run, "state": state, "previous_plan": ["(charge-card)"]})
    assert whole["plan"] == rest["plan"] == ["(charge-card)"]
    assert whole["delegate"] == rest["delegate"] == REUSE_DELEGATE
    # a plan made under other costs is planned anew (and still comes out right)
    other = call("replan", {"run_id": run, "state": state, "previous_plan": TRIP_PLAN[3:], "previous_cost_model": "x"})
    assert other["delegate"] != REUSE_DELEGATE and other["plan"] == ["(charge-card)"]


def test_previous_plan_and_executed_are_checked_and_described(url):
    bad = httpx.post(url + "/v1/replan", json={"run_id": "any", "state": [], "executed": ["(a (b))"]})
    assert bad.status_code == 400 and bad.json()["kind"] == "SchemaError" and "executed.0" in bad.json()["error"]
    long = httpx.post(url + "/v1/replan", json={"run_id": "any", "state": [], "previous_plan": ["(a)"] * 10_001})
    assert long.status_code == 400 and "previous_plan" in long.json()["error"]  # each suffix is simulated: bounded
    schema = httpx.get(url + "/openapi.json").json()["components"]["schemas"]["ReplanBody"]["properties"]
    assert {"previous_plan", "previous_cost_model", "executed"} <= set(schema)
    assert all(schema[name].get("description") for name in ("previous_plan", "previous_cost_model", "executed"))


def test_without_a_trace_store_executed_says_what_ran():
    with serve_in_thread(config()) as (base, _):
        call = over_http(base)
        run = call("plan", TRIP_BODY)["run_id"]
        state = state_after(TRIP_TASK, TRIP_PLAN[:3])
        again = call("replan", {"run_id": run, "state": state, "executed": TRIP_PLAN[:3]})
        assert again["delegate"] == REUSE_DELEGATE and again["plan"] == ["(charge-card)"]


def test_a_restart_keeps_the_run_plan_and_steps(store_target):
    db = store_target
    with serve_in_thread(config(traces=db)) as (base, _):
        call = over_http(base)
        assert call("plan", TRIP_BODY | {"run_id": "kept"})["plan"] == TRIP_PLAN
        call("record_steps", {"steps": recorded("kept", TRIP_PLAN[:3], ["success"] * 3)})
    with serve_in_thread(config(traces=db)) as (base, svc):
        state = state_after(TRIP_TASK, TRIP_PLAN[:3])
        again = over_http(base)("replan", {"run_id": "kept", "state": state})
        assert again["delegate"] == REUSE_DELEGATE and again["plan"] == ["(charge-card)"], again["attempts"]
        from traces.run_plans import run_plan

        kept = run_plan(svc.store, "kept")  # the run's plan from now on, its first step numbered after the 3
        assert kept is not None and (kept.plan, kept.first_step) == (("(charge-card)",), 3)


def test_which_recorded_steps_ran_and_how_far_they_reach():
    from portfolio.serve.runs import executed_prefix, ran

    plan = ["(a)", "(b)", "(c)", "(a)", "(d)"]

    def step(i, action, outcome="success", side_effects=None):
        return StepRecord(run_id="r", step=i, action=action, outcome=outcome, side_effects=side_effects)

    steps = [step(0, "(a)"), step(1, "(b)", "failure"), step(2, "(b)"), step(3, "(c)", "failure", True)]
    assert ran(steps) == ["(a)", "(b)", "(c)"]  # a failure ran only when it left side effects
    assert ran([step(0, "(x)", "replan")]) == ["(x)"]  # it ran, then asked for a new plan
    assert executed_prefix(plan, ["(a)", "(b)"]) == 2
    assert executed_prefix(plan, ["(a)", "(a)"]) == 4  # the plan's second (a): never handed back
    assert executed_prefix(plan, ["(c)"]) == 3  # a step skipped: execution reached (c)
    assert executed_prefix(plan, ["(a)", "(x)", "(b)"]) == 2  # (x), the runtime's own, matches nothing
    assert executed_prefix(plan, []) == 0 and executed_prefix([], ["(a)"]) == 0


def test_the_agent_http_and_mcp_give_the_same_answers_on_one_run(url, tmp_path):
    """The Agent runs the trip, replanning after every step (its planner offered the rest of its plan); the
    booking times out once and is retried, so the run's step numbers run ahead of the plan's. Its recorded
    steps, posted to the service under a run of the service's, get the same replans over HTTP and MCP."""
    from portfolio.agent import Agent
    from portfolio.delegates.registry import AGENT_DELEGATES, build_stages
    from portfolio.planner import Planner
    from traces import TraceStore

    class Spy:
        def __init__(self, planner):
            self.planner, self.calls = planner, []

        def plan(self, task, **kwargs):
            result = self.planner.plan(task, **kwargs)
            state = sorted(str(atom) for atom in kwargs["init"])
            self.calls.append((state, result.delegate, list(result.plan)))
            return result

    SENT.clear()
    FLAKY["book-flight"] = 1
    traces = tmp_path / "agent.db"
    with Planner(build_stages(AGENT_DELEGATES), warm=False) as real:
        spy = Spy(real)
        with Agent(TRIP, planner=spy, traces=traces, trigger="every-step", backoff_s=0.0) as agent:
            result = agent.run(goal=Charge)
    assert result.succeeded and SENT == ["email", "charge"]
    assert [(s.action, s.outcome) for s in result.steps] == [
        ("(send-approval-email)", "success"),
        ("(receive-approval)", "success"),
        ("(book-flight)", "failure"),
        ("(book-flight)", "success"),
        ("(charge-card)", "success"),
    ]
    with TraceStore(traces) as store:
        steps = [s for s in store.iter_steps() if s.run_id == result.run_id]
    assert [r.after_step for r in result.replans] == [0, 1, 3]
    expected = [(delegate, plan) for _, delegate, plan in spy.calls[1:]]
    assert expected == [(REUSE_DELEGATE, TRIP_PLAN[k:]) for k in (1, 2, 3)]
    for state, _, plan in spy.calls:
        assert valid_from(TRIP_TASK, plan, state)
    for interface in (over_http, over_mcp):
        call, run = interface(url), f"agent-{interface.__name__}"
        assert call("plan", TRIP_BODY | {"run_id": run})["plan"] == spy.calls[0][2]
        answers = []
        for replan, (state, _, _) in zip(result.replans, spy.calls[1:]):
            batch = [s.model_dump(mode="json") | {"run_id": run} for s in steps if s.step <= replan.after_step]
            call("record_steps", {"steps": batch})
            answer = call("replan", {"run_id": run, "state": state})
            answers.append((answer["delegate"], answer["plan"]))
        assert answers == expected, interface.__name__
