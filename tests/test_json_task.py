"""The JSON task format: the example file, round trips, schema errors that name the field, symbol errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import IPC

from domains.errors import ArityError, SchemaError, TaskInputError, UndefinedSymbolError, UnsupportedFeatureError
from domains.json_task import task_from_json, task_json_schema, task_to_json
from domains.load import load_json_task, load_task
from domains.model import And, Atom, Equals, Not
from domains.pddl import parse_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "domains" / "examples" / "blocks-task.json"


def example() -> dict:
    return json.loads(EXAMPLE.read_text())


def test_example_reads_into_a_task_with_pddl_texts() -> None:
    task = load_json_task(EXAMPLE)
    assert task.problem.objects == (("a", "block"), ("b", "block"), ("c", "block"))
    assert Atom("on", ("c", "a")) in task.problem.init and len(task.problem.init) == 6
    assert task.problem.goal == And((Atom("on", ("a", "b")), Atom("on", ("b", "c"))))
    stack = task.domain.action("stack")
    assert stack is not None and stack.cost == 1.0
    assert Not(Equals("?x", "?y")) in stack.precondition.parts  # type: ignore[union-attr]
    assert {e.atom.predicate for e in stack.effects if e.negated} == {"holding", "clear"}
    assert task.problem.minimize_total_cost
    reparsed = parse_task(task.domain_pddl, task.problem_pddl)
    assert reparsed == task


def test_example_text_is_accepted_by_fast_downward() -> None:
    from fast_downward.translate import main as translator
    from fast_downward.translate import normalize, options

    options.set_options(["d", "p"])
    import io

    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    task = load_json_task(EXAMPLE)
    fd_task = parsing_functions.parse_task(
        lisp_parser.parse_nested_list(io.StringIO(task.domain_pddl)),
        lisp_parser.parse_nested_list(io.StringIO(task.problem_pddl)),
    )
    normalize.normalize(fd_task)
    assert len(translator.pddl_to_sas(fd_task).operators) > 0


def test_task_to_json_round_trips() -> None:
    task = load_json_task(EXAMPLE)
    text = task_to_json(task)
    assert task_from_json(text) == task
    assert task_to_json(task_from_json(text)) == text


def test_ipc_strips_task_converts_to_json_and_back() -> None:
    problem = sorted((IPC / "blocks").glob("probBLOCKS-*.pddl"))[0]
    task = load_task(IPC / "blocks" / "domain.pddl", problem)
    back = task_from_json(task_to_json(task))
    assert back.problem == task.problem
    assert [a.name for a in back.domain.actions] == [a.name for a in task.domain.actions]
    for mine, theirs in zip(back.domain.actions, task.domain.actions):
        # a single-literal PDDL precondition comes back as a one-part conjunction
        theirs_parts = theirs.precondition.parts if isinstance(theirs.precondition, And) else (theirs.precondition,)
        assert mine.precondition == And(tuple(theirs_parts))
        assert set(mine.effects) == set(theirs.effects) and mine.parameters == theirs.parameters


def test_function_costs_are_not_json() -> None:
    problem = sorted((IPC / "transport-sat08-strips").glob("p*.pddl"))[0]
    task = load_task(IPC / "transport-sat08-strips" / "domain.pddl", problem)
    with pytest.raises(UnsupportedFeatureError, match="drive"):
        task_to_json(task)


def test_invalid_json_gives_line_and_column() -> None:
    text = EXAMPLE.read_text().replace('"name": "pick-up",', '"name": "pick-up"', 1)
    line = next(i for i, x in enumerate(text.split("\n"), 1) if '"pick-up"' in x) + 1
    with pytest.raises(SchemaError) as info:
        task_from_json(text, "task.json")
    assert info.value.file == "task.json" and info.value.line == line
    assert "invalid JSON" in str(info.value) and "column" in str(info.value)


@pytest.mark.parametrize(
    "mutate,fields",
    [
        (lambda d: d["actions"][2].update(cost="cheap"), ["actions[2].cost"]),
        (lambda d: d.pop("goal"), ["goal: field required"]),
        (lambda d: d["actions"][0]["parameters"][0].update(name="x"), ["actions[0].parameters[0].name", "'?'"]),
        (lambda d: d["objects"][0].update(colour="red"), ["objects[0].colour"]),
        (
            lambda d: (d["actions"][1].update(cost=-1), d["predicates"][0].update(parameters="block")),
            ["actions[1].cost", "predicates[0].parameters"],
        ),
    ],
)
def test_schema_violation_names_each_bad_field(mutate, fields: list[str]) -> None:
    data = example()
    mutate(data)
    with pytest.raises(SchemaError) as info:
        task_from_json(json.dumps(data), "task.json")
    message = str(info.value)
    assert message.startswith("task.json: the JSON task does not match the task schema")
    for field in fields:
        assert field in message
    assert "pydantic" not in message and "errors.pydantic.dev" not in message


def test_unknown_predicate_names_the_field() -> None:
    data = example()
    data["actions"][3]["preconditions"][1] = "(free ?x)"
    with pytest.raises(UndefinedSymbolError) as info:
        task_from_json(json.dumps(data), "task.json")
    assert info.value.file == "task.json"
    assert "actions[3].preconditions[1]" in str(info.value) and "'free'" in str(info.value)


def test_unknown_object_and_wrong_arity() -> None:
    data = example()
    data["goal"].append("(on a z)")
    with pytest.raises(UndefinedSymbolError, match=r"goal\[2\].*unknown object 'z'"):
        task_from_json(json.dumps(data))
    data = example()
    data["init"][0] = "(clear a b)"
    with pytest.raises(ArityError, match=r"init\[0\].*expects 1 argument\(s\), got 2"):
        task_from_json(json.dumps(data))


def test_undefined_type_is_a_schema_error_naming_the_field() -> None:
    data = example()
    data["objects"][1]["type"] = "cube"
    with pytest.raises(SchemaError, match=r"objects\[1\]\.type: undefined type 'cube'"):
        task_from_json(json.dumps(data))


def test_schema_describes_the_format() -> None:
    schema = task_json_schema()
    assert set(schema["required"]) == {"predicates", "actions", "goal"}
    assert {"types", "objects", "init"} <= set(schema["properties"])
    action = schema["$defs"]["JsonAction"]["properties"]
    assert {"preconditions", "add", "delete", "cost"} <= set(action)
    json.dumps(schema)  # serialisable for `portfolio schema task`


def test_empty_literal_is_a_schema_error() -> None:
    data = example()
    data["init"][2] = "()"
    with pytest.raises(SchemaError, match=r"init\[2\].*expected one parenthesised literal"):
        task_from_json(json.dumps(data))


# -- the fragment Fast Downward accepts, in JSON ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["either", "axioms", "quantified"])
def test_adl_tasks_convert_to_json_and_back(planner, name: str) -> None:
    from test_adl import CASES

    from domains.pddl import parse_task
    from domains.validate import validate_plan

    task = parse_task(*CASES[name])
    back = task_from_json(task_to_json(task))

    def meaning(schema):  # JSON lists conjunctions and puts deletes before adds: compare what they mean
        parts = schema.precondition.parts if isinstance(schema.precondition, And) else (schema.precondition,)
        return schema.name, schema.parameters, parts, frozenset(schema.effects), schema.cost

    assert [meaning(a) for a in back.domain.actions] == [meaning(a) for a in task.domain.actions]
    assert back.domain.axioms == task.domain.axioms
    assert back.problem == task.problem
    assert [p.type for p in back.domain.predicates[0].parameters] == [
        p.type for p in task.domain.predicates[0].parameters
    ]
    assert back.requirements_used() <= set(back.domain.requirements) | {"either"}
    result = planner.plan(back)
    assert result.solved and validate_plan(task, result.actions()).ok


def _lamps() -> dict:
    return {
        "types": [{"name": "lamp"}],
        "objects": [{"name": "l1", "type": "lamp"}, {"name": "l2", "type": "lamp"}],
        "predicates": [
            {"name": "on", "parameters": ["lamp"]},
            {"name": "bright", "parameters": []},
            {"name": "done", "parameters": ["(either lamp)"]},
        ],
        "actions": [{"name": "switch-all", "effects": ["(forall (?l - lamp) (when (not (on ?l)) (on ?l)))"]}],
        "derived": [{"name": "bright", "condition": "(forall (?l - lamp) (on ?l))"}],
        "goal": ["(bright)"],
    }


def test_json_effects_and_derived_predicates_plan(planner) -> None:
    from domains.validate import validate_plan

    task = task_from_json(json.dumps(_lamps()))
    assert {":derived-predicates", ":conditional-effects", ":universal-preconditions"} <= set(task.domain.requirements)
    result = planner.plan(task)
    assert result.solved and [str(a) for a in result.actions()] == ["(switch-all)"]
    assert validate_plan(task, result.actions()).ok


@pytest.mark.parametrize(
    "mutate,error,where",
    [
        (lambda d: d["derived"][0].update(name="dim"), UndefinedSymbolError, "derived[0].name"),
        (
            lambda d: d["actions"][0]["effects"].append("(increase (total-cost) 1)"),
            UnsupportedFeatureError,
            "actions[0].effects[1]",
        ),
        (
            lambda d: d["actions"][0]["effects"].append("(bright)"),
            UnsupportedFeatureError,
            "derived predicate 'bright'",
        ),
        (lambda d: d["predicates"][2].update(parameters=["(either lamp bulb)"]), SchemaError, "predicates[2]"),
    ],
)
def test_json_rich_parts_are_checked(mutate, error: type, where: str) -> None:
    data = _lamps()
    mutate(data)
    with pytest.raises(error, match=re.escape(where)):
        task_from_json(json.dumps(data), "task.json")


@pytest.mark.parametrize(
    "cost,expected",
    [(2.5, "expected a whole number >= 0"), (1e400, "expected a whole number >= 0"), (float("nan"), "got nan")],
)
def test_a_cost_fast_downward_cannot_read_is_a_schema_error(cost: float, expected: str) -> None:
    """A fractional cost used to reach Fast Downward's translator, whose ParseError made every delegate fail
    (exit 1); an infinite one (`1e400` in the file) made the translator call the task unsolvable, a false proof."""
    data = example()
    data["actions"][2]["cost"] = cost
    with pytest.raises(SchemaError, match=r"actions\[2\]\.cost: .*" + re.escape(expected)):
        task_from_json(json.dumps(data), "task.json")


def test_an_object_listed_twice_is_a_schema_error_naming_it() -> None:
    """Fast Downward refuses duplicate objects: that used to surface as every delegate failing (exit 1)."""
    data = example()
    data["objects"].append({"name": "a", "type": "block"})
    with pytest.raises(SchemaError, match=r"objects\[3\]\.name: object 'a' is listed twice"):
        task_from_json(json.dumps(data), "task.json")


@pytest.mark.parametrize(
    "mutate,expected",
    [
        (lambda d: d["goal"].append("(clear a b)"), "task.json: goal[2]: predicate 'clear' expects 1 argument(s)"),
        (lambda d: d["init"].append("(on a q)"), "task.json: init[6] mentions unknown object 'q'"),
        (
            lambda d: d["actions"][0]["preconditions"].append("(shiny ?x)"),
            "task.json: actions[0].preconditions[3] uses undefined predicate 'shiny'",
        ),
    ],
)
def test_a_symbol_error_names_its_field_once(mutate, expected: str) -> None:
    """The field used to be named twice: `goal[2]: goal[2]: predicate 'clear' expects ...`."""
    data = example()
    mutate(data)
    with pytest.raises(TaskInputError) as info:
        task_from_json(json.dumps(data), "task.json")
    assert str(info.value).startswith(expected), str(info.value)
