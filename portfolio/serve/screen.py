"""Screening a JSON request body before the app parses it: limits that make every malformed input a 400.

The routes' pydantic models check each field's type, but some JSON is well typed and still breaks what comes
after: 900 nested objects in `features` or `task` (a `dict[str, Any]`) passed validation and then raised
RecursionError when pickled to a worker; a lone surrogate (`"\\ud800"`) is a `str` that cannot be encoded as
UTF-8, so echoing it in an answer or writing it to SQLite failed; a step number of 2^63 overflowed SQLite's
INTEGER; `NaN` and `Infinity` (which Python's `json` accepts and JSON does not) were stored and exported as
`null`. Each was a 500. So the body is read in, parsed once and walked here first, with the limits below, and
any violation is answered 400 with the JSON path of the offending value.

`screen` is pure and runs on a thread for large bodies (`portfolio.serve.http.Guard`), so a 30 MB body does
not hold the event loop while it is walked. The walk is iterative: a deep document cannot exhaust the stack
here either (`json.loads` itself refuses nesting deeper than its C recursion limit with RecursionError, which
is answered the same way).
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # objects and arrays inside each other: a JSON task nests about 6 deep
INT64 = (-(2**63), 2**63 - 1)  # what SQLite's INTEGER holds


class BodyRejected(ValueError):
    """A body that breaks a screening limit; the message names where."""


def _constant(name: str) -> Any:
    raise BodyRejected(f"{name} is not a JSON number (only finite numbers are accepted)")


def screen(body: bytes) -> None:
    """Raise `BodyRejected` when `body` is JSON that breaks a limit (depth, 64-bit integers, finite numbers,
    Unicode strings). Bodies that are not JSON at all are left to the app, which names the position."""
    try:
        document = json.loads(body, parse_constant=_constant)
    except RecursionError:
        raise BodyRejected(f"body: nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as error:
        if isinstance(error, BodyRejected):
            raise BodyRejected(f"body: {error}") from None
        return  # not JSON: the app answers 400 with where it broke
    stack: list[tuple[Any, tuple, int]] = [(document, (), 0)]
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
        raise BodyRejected(f"{_where(path)}: a lone surrogate ({text[error.start]!a}) at character "
                           f"{error.start} is not Unicode text") from None


def _where(path: tuple) -> str:
    shown = ".".join(str(p) for p in path[:8]) + (".…" if len(path) > 8 else "")
    return f"body.{shown}" if shown else "body"
