"""Validation out of the server's process: `python -m portfolio.serve.validator CONFIG_JSON`.

Checking a plan parses the task and simulates every step, and a quantified precondition is expanded over the
objects (`(forall (?x1 ... ?x7 - obj) ...)` over 50 objects is 50^7 conditions), so one request can take any
amount of time and memory. Validation therefore runs here, like planning runs in the planner workers: a small
pool of light processes (they import the task model and the validator only), one request at a time each, under
the memory cap (`RLIMIT_AS`), with a deadline after which the pool kills the process and starts a fresh one,
and behind the same kind of bounded queue (`PlannerPool`), so a flood of validations is refused with 503 rather
than queued without limit. Each caller (an API key's principal) has a queue of its own and callers take turns,
one holding all validators but one at most, so one caller's flood delays only itself. Planning keeps its own
workers: an expensive validation never holds up a plan, nor the trace store.

Before a step is checked, the worst case of the check is worked out from the task and the plan
(`domains.validate_cost`: the quantifiers' bindings over the objects of their types, per step of the plan) and a
check that cannot finish within the deadline or the memory cap is refused at once (`too_costly`), so the
7-variable forall above costs the parse and no more. A validation whose client has gone is stopped in the same
way as one past its deadline (the pool kills its process: `PlannerPool.call(stop_when_cancelled=True)`).

Ops: `validate` (a `ValidateBody` as a dict, the deadline, the memory cap -> {"result": Verdict as a dict},
{"bad_input": {error, kind}} or {"too_costly": {error}}), `ping`. What validation in the server did, and what a
validator process costs: docs/decisions/validation-processes.md.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from portfolio.serve.pool import PoolWorker

if TYPE_CHECKING:
    from domains.validate_cost import ValidationCost

log = logging.getLogger(__name__)

# Address space a validator needs for itself (the interpreter, pydantic, the task model), in MB, on top of
# what the task may use: measured ~60 MB resident, ~250 MB mapped.
VALIDATOR_HEADROOM_MB = 512
# Conditions a validator checks a second, at most: measured ~3e5 on the 2-core CI machine (a forall over four
# variables of 50 objects, 6.25e6 bindings, in 19 s; 1e6 bindings of a two-variable one in 2.7-5.6 s). Three
# times that: a check refused for it would not finish on a machine three times as fast either.
CONDITIONS_PER_S = 1_000_000
# A ground atom in a state (the atom, its tuple, the set's entry): measured ~320 B with strings of its own, and
# an effect's atoms share the objects' names.
ATOM_BYTES = 256


class ValidatorConfig(BaseModel):
    memory_limit_mb: int = Field(gt=0)


class ValidatorWorker(PoolWorker):
    module = "portfolio.serve.validator"


def too_costly(cost: ValidationCost, budget_s: float, memory_limit_mb: int) -> str | None:
    """Why a check of worst-case `cost` cannot finish within `budget_s` seconds and `memory_limit_mb` (what,
    how large, the limit), or None when it may."""
    from domains.validate_cost import count

    most_conditions = int(budget_s * CONDITIONS_PER_S)
    most_atoms = memory_limit_mb * 1024 * 1024 // ATOM_BYTES
    largest = f" (the largest: {cost.largest.describe()})" if cost.largest is not None else ""
    if cost.conditions > most_conditions:
        return (
            f"validation refused: checking this plan takes up to {count(cost.conditions)} condition checks"
            f"{largest}, over the {count(most_conditions)} this server checks within its {budget_s:g} s "
            "(--validate-budget)"
        )
    if cost.atoms > most_atoms:
        return (
            f"validation refused: one step of this plan builds up to {count(cost.atoms)} ground atoms{largest}, "
            f"over the {count(most_atoms)} that fit the server's memory cap ({memory_limit_mb} MB, --memory-limit)"
        )
    return None


def validate(body: dict[str, Any], budget_s: float, memory_limit_mb: int) -> dict[str, Any]:
    """The verdict on a `ValidateBody` as a dict; refused before a step is checked (`too_costly`) when the
    worst case of the check cannot finish within `budget_s` and `memory_limit_mb`."""
    from domains.errors import TaskInputError
    from domains.validate_cost import validation_cost
    from portfolio.serve.models import BadRequest, ValidateBody
    from portfolio.serve.verdict import read_body, verdict

    try:
        task, steps, init = read_body(ValidateBody.model_validate(body))
    except (TaskInputError, BadRequest) as error:
        return {"bad_input": {"error": str(error), "kind": getattr(error, "kind", type(error).__name__)}}
    refusal = too_costly(validation_cost(task, steps), budget_s, memory_limit_mb)
    if refusal is not None:
        return {"too_costly": {"error": refusal}}
    return {"result": verdict(task, steps, init).model_dump(mode="json")}


def main() -> None:
    from portfolio.engine import limits
    from portfolio.engine.worker_main import open_channel, serve

    requests, responses = open_channel()  # stray prints go to stderr, never into the channel
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s validator %(process)d %(name)s: %(message)s")
    config = ValidatorConfig.model_validate_json(sys.argv[1])
    limits.die_with_parent()  # a killed server leaves no validator behind
    limits.apply_to_self(config.memory_limit_mb + VALIDATOR_HEADROOM_MB)
    import domains.validate
    import domains.validate_cost  # noqa: F401
    import portfolio.serve.verdict  # noqa: F401 - warm the imports before the first request

    serve(requests, responses, {"validate": validate, "ping": lambda: {"pong": os.getpid()}})


if __name__ == "__main__":
    main()
