"""What counts as a number in parsed JSON, a row or an endpoint's extras: one rule, so
that every reader agrees. A boolean is not one (JSON `true` is not 1, though Python's
`bool` is an `int`), nor is text; a figure must also be finite. Readers that must say
why a value was refused raise their own error after asking here."""

from __future__ import annotations

import math
import numbers
from typing import SupportsFloat, SupportsIndex, SupportsInt, TypeGuard


def is_number(x: object) -> TypeGuard[int | float]:
    """Whether `x` is an int or a float, a boolean excluded (NaN and infinities included:
    ask `finite_float` for a figure)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def finite_float(x: object) -> float | None:
    """`x` as a float when it is a finite real number (numpy's scalars included, as
    pandas hands them); None when it is missing, a boolean, text, NaN, infinite or an
    integer too large for a float."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    try:
        f = float(x)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


# what `float()` and `int()` take, the plain types first (the common case, before the
# protocol checks; a constant: a union in the call would be built on every one)
_FLOATS = (float, int, str, SupportsFloat, SupportsIndex)
_INTS = (float, int, str, SupportsInt, SupportsIndex)


def to_float(x: object) -> float:
    """`float(x)` for a value whose type mypy cannot know (read from JSON, a row or a
    counter block): a number, numpy's included, or numeric text; TypeError otherwise,
    worded as `float()` words it. The one place such a value is narrowed."""
    if isinstance(x, _FLOATS):
        return float(x)
    raise TypeError(f"float() argument must be a string or a real number, "
                    f"not '{type(x).__name__}'")


def to_int(x: object) -> int:
    """`int(x)` for a value whose type mypy cannot know, as `to_float` (TypeError,
    worded as `int()` words it, for a value `int()` refuses)."""
    if isinstance(x, _INTS):
        return int(x)
    raise TypeError(f"int() argument must be a string, a bytes-like object or a real "
                    f"number, not '{type(x).__name__}'")
