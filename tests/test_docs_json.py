"""The docs' `portfolio plan --json` example (docs/cli.md) shows the PlanResult as it is: every
field the output has, for the result and for its attempt, and nothing it does not have. (tests/test_docs_examples.py
re-runs the walkthroughs' console examples; this pins the one example a JSON client is written against.)"""

from __future__ import annotations

import json
from dataclasses import fields

from support import REPO

from portfolio.engine.results import Attempt, PlanResult

COMMAND = "$ portfolio plan tests/data/ipc/blocks/domain.pddl tests/data/ipc/blocks/probBLOCKS-4-0.pddl --json\n"


def test_the_docs_json_example_has_every_field_of_the_output():
    text = (REPO / "docs" / "cli.md").read_text()
    block = text[text.index(COMMAND) + len(COMMAND) :]
    example = json.loads(block[: block.index("```")])
    assert set(example) == {f.name for f in fields(PlanResult)}
    [attempt] = example["attempts"]
    assert set(attempt) == {f.name for f in fields(Attempt)}
    PlanResult.model_validate(example)  # and every value is one the model takes
