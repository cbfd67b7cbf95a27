"""Durations typed by a person ('90', '90s', '10m', '1.5h'), one parser for every option
and every library call that takes one, so a refusal reads the same from either."""

from __future__ import annotations

import re

from simulator.errors import InputError

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*$")


def parse_duration_s(text: str, option: str = "--duration") -> float:
    """'90', '90s', '10m', '1.5h' → seconds (> 0); InputError otherwise."""
    m = _DUR.match(text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"{option}: expected a positive duration such as 600, 90s, 10m "
                         f"or 1h, got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]
