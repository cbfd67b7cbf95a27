"""How the tables and lines of the reports, the CLI and the live view write a number: the
variants that genuinely differ, each named once. A missing figure reads "n/a" (the live
view passes "—"); a boolean is not a number and reads as missing."""

from __future__ import annotations

import math
import numbers

MISSING = "n/a"


def percent(share: object, digits: int = 1, missing: str = MISSING) -> str:
    """A share (0.123) as a percentage ("12.3%" with `digits` decimals)."""
    if isinstance(share, bool) or not isinstance(share, numbers.Real):
        return missing
    return f"{100.0 * float(share):.{digits}f}%"


def number(v: object, fmt: str = "{:,.1f}", missing: str = MISSING) -> str:
    """A number through a format spec (default: thousands separated, one decimal); the
    spec "{:d}" writes it as a whole number."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return missing
    return fmt.format(math.trunc(v) if fmt == "{:d}" else float(v))


def significant(v: float, digits: int, whole_from: float) -> str:
    """A whole, thousands-separated number from `whole_from` up in size; below it,
    `digits` significant digits ("0.0123", "45.6", "12,345")."""
    return f"{v:,.0f}" if abs(v) >= whole_from else f"{v:.{digits}g}"
