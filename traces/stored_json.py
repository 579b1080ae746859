"""The JSON kept in the trace store's rows (a model's metadata and metrics, a selection model's metadata, a task
source, a plan's attempts), read back through pydantic: a row that was hand-edited or damaged is a `BadRowError`
that names the file, the table, the row and the column, never a `JSONDecodeError` without them (which `portfolio
serve` once exited with), nor a crash further on.

    metadata = read_json(OBJECT, text, where=row_name(store.path, "models", "version 3", "metadata"))

Parsing is pydantic's (`TypeAdapter.validate_json`): one pass, with a nesting limit of its own (a document nested
deeper is refused, where `json.loads` overflows Python's stack with a `RecursionError`, which no caller expected).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from traces.errors import BadRowError

T = TypeVar("T")
OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
LIST: TypeAdapter[list[Any]] = TypeAdapter(list[Any])


def row_name(path: str, table: str, row: str, column: str | None = None) -> str:
    """How a row is named in errors: `PATH: table models, version 3, column metadata`."""
    return f"{path}: table {table}, {row}" + (f", column {column}" if column else "")


def describe(error: ValidationError, limit: int = 3) -> str:
    """pydantic's findings, where and what, the first `limit` of them; never the row's text."""
    parts = []
    for item in error.errors(include_input=False)[:limit]:
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"{where}: {item['msg']}" if where else item["msg"])
    more = len(error.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def read_json(adapter: TypeAdapter[T], text: str | bytes | None, where: str, empty: str = "{}") -> T:
    """`text` (NULL or empty: `empty`) parsed and checked against `adapter`; `BadRowError` naming `where`."""
    try:
        return adapter.validate_json(text or empty)
    except ValidationError as error:
        raise BadRowError(f"{where} cannot be read: {describe(error)}.") from None
