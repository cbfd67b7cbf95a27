"""The types of data that is JSON as it stands: a journal line read back, what an
endpoint describes for the manifest. A name for it, where an untyped value stood, so
that a reader narrows each value it uses (`util.numbers.to_float`, `isinstance`) and
mypy checks that it does."""

from __future__ import annotations

from typing import TypeAlias

JSONScalar: TypeAlias = str | int | float | bool | None
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject: TypeAlias = dict[str, JSONValue]


def as_object(value: object) -> JSONObject:
    """`value` when it is a JSON object, else {} (a wrong shape reads as absent)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[JSONValue]:
    """`value` when it is a JSON array, else []."""
    return value if isinstance(value, list) else []
