"""Validation out of the server's process: `python -m portfolio.serve.validator CONFIG_JSON`.

Checking a plan parses the task and simulates every step, and a quantified precondition is expanded over the
objects: `(forall (?x1 ... ?x7 - obj) ...)` over 50 objects is 50^7 conditions. Run in the server (as it once
was, on the threads the trace store also used) four such requests stalled the whole service until restart,
and four 31 MB bodies took the server from 196 MB to 4.3 GB. So validation runs here, like planning runs in
the planner workers: a small pool of light processes (they import the task model and the validator only:
~0.3 s to start, ~60 MB), one request at a time each, under the memory cap (`RLIMIT_AS`), with a deadline
after which the pool kills the process and starts a fresh one, and behind the same kind of bounded queue
(`PlannerPool`), so a flood of validations is refused with 503 rather than queued without limit. Planning
keeps its own workers: an expensive validation never holds up a plan, nor the trace store.

Ops: `validate` (a `ValidateBody` as a dict -> {"result": Verdict as a dict} or {"bad_input": {error, kind}}),
`ping`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from pydantic import BaseModel, Field

from portfolio.serve.pool import PoolWorker

log = logging.getLogger(__name__)

# Address space a validator needs for itself (the interpreter, pydantic, the task model), in MB, on top of
# what the task may use: measured ~60 MB resident, ~250 MB mapped.
VALIDATOR_HEADROOM_MB = 512


class ValidatorConfig(BaseModel):
    memory_limit_mb: int = Field(gt=0)


class ValidatorWorker(PoolWorker):
    module = "portfolio.serve.validator"


def validate(body: dict[str, Any]) -> dict[str, Any]:
    from domains.errors import TaskInputError
    from portfolio.serve.models import BadRequest, ValidateBody
    from portfolio.serve.verdict import verdict_for

    try:
        return {"result": verdict_for(ValidateBody.model_validate(body)).model_dump(mode="json")}
    except (TaskInputError, BadRequest) as error:
        return {"bad_input": {"error": str(error), "kind": getattr(error, "kind", type(error).__name__)}}


def main() -> None:
    from portfolio.engine import limits
    from portfolio.engine.worker_main import serve

    responses = os.fdopen(os.dup(1), "wb")
    requests = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)  # stray prints go to stderr, never into the channel
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s validator %(process)d %(name)s: %(message)s")
    config = ValidatorConfig.model_validate_json(sys.argv[1])
    limits.die_with_parent()  # a killed server leaves no validator behind
    limits.apply_to_self(config.memory_limit_mb + VALIDATOR_HEADROOM_MB)
    import domains.validate  # noqa: F401
    import portfolio.serve.verdict  # noqa: F401 - warm the imports before the first request

    serve(requests, responses, {"validate": validate, "ping": lambda: {"pong": os.getpid()}})


if __name__ == "__main__":
    main()
