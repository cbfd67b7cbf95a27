"""The types of data that is JSON as it stands: a journal line read back, what an
endpoint describes for the manifest. A name for it, in place of `Any`, so that a
reader narrows each value it uses (`util.numbers.to_float`, `isinstance`) and mypy
checks that it does."""

from __future__ import annotations

from typing import TypeAlias

JSONScalar: TypeAlias = str | int | float | bool | None
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject: TypeAlias = dict[str, JSONValue]
