"""Replans reuse over HTTP and MCP as they do in Python: the service keeps each run's current plan, so a replan
from a state the plan still works from returns the rest of it (`plan-reuse`), and a state it does not fit gets a
new plan. One test over both interfaces, the same bodies, the same answers (httpx and the official MCP client)."""

from __future__ import annotations

import pytest
from test_service_helpers import BLOCKS_4, BLOCKS_DOMAIN, config, over_http, over_mcp, serve_in_thread, validated


def _state_after(steps: list[str]) -> list[str]:
    from domains.ground_text import parse_ground_action
    from domains.pddl import parse_task
    from domains.validate import apply

    task = parse_task(BLOCKS_DOMAIN, BLOCKS_4)
    state = task.problem.init
    for step in steps:
        state = apply(task, state, parse_ground_action(step))
    return sorted(str(atom) for atom in state)


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    """One server for both interfaces: each test plans a run of its own, and a run's kept plan is per run."""
    with serve_in_thread(config(traces=str(tmp_path_factory.mktemp("reuse") / "t.db"))) as (base, _):
        yield base


@pytest.mark.parametrize("interface", [over_http, over_mcp], ids=["http", "mcp"])
def test_a_replan_from_a_state_the_plan_still_fits_returns_the_rest_of_it(url, interface):
    call = interface(url)
    first = call("plan", {"domain": BLOCKS_DOMAIN, "problem": BLOCKS_4})
    assert first["status"] == "solved" and len(first["plan"]) >= 4
    done = first["plan"][:2]
    again = call("replan", {"run_id": first["run_id"], "state": _state_after(done)})
    assert again["delegate"] == "plan-reuse", again["attempts"]
    assert again["plan"] == first["plan"][2:]
    assert validated(BLOCKS_DOMAIN, BLOCKS_4, again["plan"], init=_frozen(_state_after(done)))
    # a state the kept plan no longer fits: planned anew, and that plan is the run's from now on
    other = ["(clear a)", "(on a b)", "(on b c)", "(on c d)", "(ontable d)", "(handempty)"]
    fresh = call("replan", {"run_id": first["run_id"], "state": other})
    assert fresh["delegate"] != "plan-reuse" and fresh["status"] == "solved"
    assert validated(BLOCKS_DOMAIN, BLOCKS_4, fresh["plan"], init=_frozen(other))


def _frozen(atoms: list[str]):
    from domains.formulas import parse_atom

    return frozenset(parse_atom(a) for a in atoms)
