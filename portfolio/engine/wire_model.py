"""`WireModel`: pydantic's model methods for a standard-library dataclass, pydantic imported on first use.

A class that crosses process and wire boundaries (CLI `--json`, HTTP, MCP) but is also made on every planning call
is a dataclass with this mixin: `model_dump`, `model_dump_json`, `model_validate`, `model_validate_json`,
`model_copy` and `model_json_schema` answer as a pydantic `BaseModel`'s do, through a `pydantic.TypeAdapter` of
the class built the first time one is called. Importing such a class imports no pydantic, so a plain
`portfolio plan` never pays for it (docs/decisions/results-without-pydantic.md).

Field descriptions go in each field's metadata (`dataclasses.field(metadata={"description": ...})`), which
pydantic reads into the JSON Schema of the class and of its subclasses. FastAPI and the MCP SDK take such a
class as a response model as they take any dataclass.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from pydantic import TypeAdapter

# class -> its adapter, one a class (a subclass has fields of its own); built once, on first use
_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def adapter(cls: type) -> TypeAdapter[Any]:
    """The `TypeAdapter` of `cls`, built (and pydantic imported) the first time it is asked for. Two threads
    asking at once may both build one; either serves."""
    found = _ADAPTERS.get(cls)
    if found is None:
        from pydantic import TypeAdapter

        found = _ADAPTERS[cls] = TypeAdapter(cls)
    return found


class WireModel:
    """Mixin for a dataclass: pydantic `BaseModel`'s serialisation and validation methods, with the same keyword
    arguments (`mode`, `include`, `exclude`, `exclude_none`, `indent`, `strict`, `ref_template`, ...), which go
    unchanged to the class's `TypeAdapter` (`adapter`)."""

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """The fields as a dict (`mode="json"`: JSON values, enums as their values)."""
        dumped: dict[str, Any] = adapter(type(self)).dump_python(self, **options)
        return dumped

    def model_dump_json(self, **options: Any) -> str:
        """The fields as a JSON text (`indent=2` for a readable one)."""
        return adapter(type(self)).dump_json(self, **options).decode()

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        """An instance from a dict (or an instance, returned as it is), validated and coerced as pydantic does;
        `pydantic.ValidationError` says where it departs from the fields."""
        validated: Self = adapter(cls).validate_python(obj, **options)
        return validated

    @classmethod
    def model_validate_json(cls, data: str | bytes, **options: Any) -> Self:
        """An instance from a JSON text, as `model_validate`."""
        validated: Self = adapter(cls).validate_json(data, **options)
        return validated

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (`deep`: of every value too) with the attributes in `update` replaced, not validated (as
        pydantic's `model_copy`)."""
        copied = copy.deepcopy(self) if deep else copy.copy(self)
        for name, value in (update or {}).items():
            setattr(copied, name, value)
        return copied

    @classmethod
    def model_json_schema(cls, **options: Any) -> dict[str, Any]:
        """The JSON Schema of the class (`by_alias`, `ref_template`, `mode`, ... as pydantic's)."""
        return adapter(cls).json_schema(**options)
