"""An interval's scenario is written as one line of JSON (`yaml_json`, issue 58: the
YAML representer was 12% of a 100,000-request day's `size --interval`): whenever it
is, the YAML loader scenarios are read with gives back exactly the data; where it
would not (a float without '.', inf, an astral character), it is not used."""

from __future__ import annotations

import math
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.sweep.team_hours import yaml_json

LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
data = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4)),
    max_leaves=30)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and (a == b if not isinstance(a, dict | list) else (
        len(a) == len(b) and all(_same(x, y) for x, y in (
            zip(a.items(), b.items(), strict=True) if isinstance(a, dict)
            else zip(a, b, strict=True)))))


@settings(max_examples=400, deadline=None)
@given(data)
def test_what_is_written_as_json_reads_back_the_same_as_yaml(value: Any) -> None:
    text = yaml_json({"v": value})
    if text is not None:
        assert _same(yaml.load(text, Loader=LOADER), {"v": value})


def test_what_yaml_would_read_otherwise_is_not_written_as_json() -> None:
    for v in (1e-05, 1e20, float("inf"), float("nan"), "smile \U0001F600"):
        assert yaml_json({"v": v}) is None, v
    assert yaml_json({1: "int key"}) is None
    assert yaml_json({"at_s": 1.5, "ids": ["s0", "é", "del \x7f"], "n": None}) is not None
