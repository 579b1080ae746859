"""`PlanResult` and `Attempt` as dataclasses with pydantic's model methods (`portfolio.engine.wire_model`): importing
them loads no pydantic, the methods answer as a pydantic model's did, and the schema keeps every description,
in `PlanResponse` (a subclass) too."""

from __future__ import annotations

import json
import subprocess
import sys

from portfolio.engine.results import Attempt, PlanResult, Status


def a_result() -> PlanResult:
    attempt = Attempt(
        delegate="fast-downward", status="solved", elapsed_ms=12.5, details={"search": "lama-first", "retired": 1}
    )
    return PlanResult(status="solved", plan=["(pick-up a)"], cost=1.0, delegate="fast-downward", attempts=[attempt])


def test_importing_the_results_loads_no_pydantic_until_a_model_method_is_called():
    code = (
        "import sys; from portfolio.engine.results import PlanResult; "
        "before = 'pydantic' in sys.modules; PlanResult(status='solved').model_dump(); "
        "print(before, 'pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def test_a_result_goes_to_json_and_back_with_statuses_and_unknown_detail_keys_as_they_were():
    result = a_result()
    assert result.status is Status.SOLVED and result.attempts[0].status is Status.SOLVED and result.solved
    text = result.model_dump_json()
    assert json.loads(text)["attempts"][0]["details"] == {"search": "lama-first", "retired": 1}
    assert PlanResult.model_validate_json(text) == result
    assert PlanResult.model_validate(json.loads(text)) == result
    assert result.model_dump(mode="json")["status"] == "solved" and result.model_dump()["status"] is Status.SOLVED


def test_the_planned_costs_are_never_serialised_nor_read_back():
    result = a_result()
    result._planned_costs = {"(pick-up a)": "a cost"}
    assert "_planned_costs" not in result.model_dump() and "planned" not in result.model_dump_json()
    assert "_planned_costs" not in PlanResult.model_json_schema()["properties"]
    assert PlanResult.model_validate(result.model_dump())._planned_costs is None
    assert result.model_copy()._planned_costs == {"(pick-up a)": "a cost"}


def test_model_copy_replaces_what_update_names_and_leaves_the_original():
    result = a_result()
    copied = result.model_copy(update={"cost": 2.0})
    assert (copied.cost, result.cost) == (2.0, 1.0) and copied.plan == result.plan


def test_an_attempt_keeps_a_copy_of_the_details_it_was_given():
    details = {"search": "lama-first"}
    attempt = Attempt(delegate="fast-downward", status=Status.SOLVED, elapsed_ms=1.0, details=details)
    details["search"] = "changed"
    assert attempt.details == {"search": "lama-first"}


def test_the_service_answer_schema_describes_the_inherited_fields_and_its_own():
    from portfolio.serve.models import PlanResponse

    properties = PlanResponse.model_json_schema()["properties"]
    assert "(pick-up a)" in properties["plan"]["description"]
    assert properties["status"]["description"].startswith("The call's outcome: solved;")
    assert "replan" in properties["run_id"]["description"]
    assert "_planned_costs" not in properties
