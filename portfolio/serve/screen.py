"""Screening a JSON request body before the app parses it: limits that make every malformed input a 400.

The routes' pydantic models check each field's type, but some JSON is well typed and still breaks what comes
after: 900 nested objects in `features` or `task` (a `dict[str, Any]`) passed validation and then raised
RecursionError when pickled to a worker; a lone surrogate (`"\\ud800"`) is a `str` that cannot be encoded as
UTF-8, so echoing it in an answer or writing it to SQLite failed; a step number of 2^63 overflowed SQLite's
INTEGER; `NaN` and `Infinity` (which Python's `json` accepts and JSON does not) were stored and exported as
`null`. Each was a 500. So the body is read in, parsed once and walked here first, with the limits below, and
any violation is answered 400 with the JSON path of the offending value.

`screen` is pure and runs on a thread for large bodies (`portfolio.serve.guard.Guard`). A thread only helps
if it lets go of the interpreter: one `json.loads` of a 30 MB step batch holds it for ~1 s, and pydantic
validating the batch for ~3 s more (measured; the event loop answered nothing meanwhile). So the first two
levels of a document (the body object and its arrays, such as `steps`) are decoded here one element at a
time, each a short call, with the walk between them; the decoded document is handed on with the request
(`scope["state"]["screened_json"]`), and /v1/steps validates it in batches on a thread instead of letting
FastAPI parse and validate it on the loop. The walk is iterative: a deep document cannot exhaust the stack
here either (`json` itself refuses nesting deeper than its C recursion limit with RecursionError, which is
answered the same way).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from portfolio.serve.models import StepsBody

MAX_DEPTH = 64  # objects and arrays inside each other: a JSON task nests about 6 deep
INT64 = (-(2**63), 2**63 - 1)  # what SQLite's INTEGER holds


NOT_JSON = object()  # what `screen` returns for a body that is not JSON (the app says where it breaks)
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER: json.JSONDecoder | None = None


def _skip(text: str, index: int) -> int:
    """The index after the JSON whitespace at `index` (`_SPACE` matches the empty string too: always a match)."""
    match = _SPACE.match(text, index)
    assert match is not None
    return match.end()


class BodyRejected(ValueError):
    """A body that breaks a screening limit; the message names where."""


class _NotJSON(Exception):
    pass


def _constant(name: str) -> Any:
    raise BodyRejected(f"body: {name} is not a JSON number (only finite numbers are accepted)")


def screen(body: bytes) -> Any:
    """The decoded document, or `NOT_JSON`; raises `BodyRejected` when `body` is JSON that breaks a limit
    (depth, 64-bit integers, finite numbers, Unicode strings)."""
    try:
        text = body.decode("utf-8", "surrogatepass")  # as json.loads(bytes) does: lone surrogates get through
        return _value(text, 0, (), 0, top=True)[0]
    except RecursionError:
        raise BodyRejected(f"body: nested deeper than {MAX_DEPTH} levels") from None
    except (_NotJSON, ValueError) as error:  # JSONDecodeError, UnicodeDecodeError
        if isinstance(error, BodyRejected):
            raise
        return NOT_JSON


def _decoder() -> json.JSONDecoder:
    global _DECODER
    if _DECODER is None:
        _DECODER = json.JSONDecoder(parse_constant=_constant)
    return _DECODER


def _value(text: str, index: int, path: tuple, level: int, top: bool = False) -> tuple[Any, int]:
    """Decode the value at `index`: the first two levels of containers element by element, the rest with one
    `raw_decode` each, every decoded element walked. Returns (value, index after it)."""
    index = _skip(text, index)
    opening = text[index : index + 1]
    if level < 2 and opening in ("{", "["):
        container: dict[str, Any] | list[Any]
        closing, container = ("}", {}) if opening == "{" else ("]", [])
        index = _skip(text, index + 1)
        if text[index : index + 1] == closing:
            return container, _end(text, index + 1, top)
        while True:
            if isinstance(container, dict):  # opening == "{"
                key, index = _decoder().raw_decode(text, index)
                if not isinstance(key, str):
                    raise _NotJSON()
                _check_text(key, path + (key,))
                index = _skip(text, index)
                if text[index : index + 1] != ":":
                    raise _NotJSON()
                item, index = _value(text, index + 1, path + (key,), level + 1)
                container[key] = item
            else:
                item, index = _value(text, index, path + (len(container),), level + 1)
                container.append(item)
            index = _skip(text, index)
            separator = text[index : index + 1]
            if separator == closing:
                return container, _end(text, index + 1, top)
            if separator != ",":
                raise _NotJSON()
            index = _skip(text, index + 1)
    value, end = _decoder().raw_decode(text, index)
    _walk(value, path, level)
    return value, _end(text, end, top)


def _end(text: str, index: int, top: bool) -> int:
    if top and _skip(text, index) != len(text):
        raise _NotJSON()  # trailing data
    return index


def _walk(document: Any, path: tuple, depth: int) -> None:
    stack: list[tuple[Any, tuple, int]] = [(document, path, depth)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                raise BodyRejected(f"{_where(path)}: nested deeper than {MAX_DEPTH} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _check_text(key, path + (key,))
                stack.append((item, path + (key,), depth + 1))
        elif isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if not INT64[0] <= value <= INT64[1]:
                raise BodyRejected(f"{_where(path)}: the integer {str(value)[:30]} is outside the 64-bit range")
        elif isinstance(value, float) and value in (float("inf"), float("-inf")):  # 1e999 parses as inf
            raise BodyRejected(f"{_where(path)}: {value} is not a finite number")


def _check_text(text: str, path: tuple) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BodyRejected(
            f"{_where(path)}: a lone surrogate ({text[error.start]!a}) at character {error.start} is not Unicode text"
        ) from None


def _where(path: tuple) -> str:
    shown = ".".join(str(p) for p in path[:8]) + (".…" if len(path) > 8 else "")
    return f"body.{shown}" if shown else "body"


def steps_body(document: Any, batch: int = 2000) -> StepsBody:
    """`StepsBody` from a decoded document, the steps validated `batch` at a time (each a short call, so the
    event loop's thread gets the interpreter between them); `BadRequest` (SchemaError) naming the step. The
    document's steps are let go of as they are read (its list holds None after), so a batch is held once as
    decoded JSON or as records, not as both: a 23 MB batch is ~240 MB of dicts and ~280 MB of records."""
    from pydantic import TypeAdapter, ValidationError

    from portfolio.serve.models import BadRequest, StepsBody
    from traces.records import StepRecord

    if not isinstance(document, dict) or not isinstance(document.get("steps"), list):
        return StepsBody.model_validate(document)  # the envelope is wrong: pydantic says how
    envelope = StepsBody.model_validate({**document, "steps": []})  # extra keys, the idempotency key
    records, adapter, steps = [], TypeAdapter(list[StepRecord]), document["steps"]
    for start in range(0, len(steps), batch):
        try:
            records += adapter.validate_python(steps[start : start + batch])
        except ValidationError as error:
            item = error.errors()[0]
            where = ".".join(str(p) for p in (int(item["loc"][0]) + start, *item["loc"][1:]))  # [0]: the index
            raise BadRequest(f"steps.{where}: {item['msg']}", "SchemaError") from None
        steps[start : start + batch] = [None] * len(steps[start : start + batch])
    return StepsBody.model_construct(steps=records, idempotency_key=envelope.idempotency_key)
