"""The number formats the reports, the CLI and the live view share: each variant writes
what its callers wrote before (the strings below are theirs)."""

from __future__ import annotations

import numpy as np

from simulator.util.formats import number, percent, significant


def test_percent() -> None:
    assert percent(0.1234) == "12.3%" and percent(0.12345, 2) == "12.35%"
    assert percent(1) == "100.0%" and percent(np.float64(0.5)) == "50.0%"
    assert percent(None) == "n/a" and percent(None, missing="—") == "—"
    assert percent(True) == "n/a"            # a boolean is not a share
    # the same text as Python's own % format, which some callers used
    assert all(percent(x / 997, d) == f"{x / 997:.{d}%}" for x in range(2000) for d in (1, 2))


def test_number() -> None:
    assert number(1234.56) == "1,234.6" and number(3) == "3.0"
    assert number(3.7, "{:d}") == "3" and number(2.5, "{:.2f}") == "2.50"
    assert number(np.int64(5), "{:,.0f}") == "5"
    assert number(None) == "n/a" and number(None, missing="—") == "—"
    assert number(True) == "n/a" and number("12") == "n/a"


def test_significant() -> None:
    assert significant(0.012345, 3, 100) == "0.0123" and significant(99.94, 3, 100) == "99.9"
    assert significant(12345.6, 3, 100) == "12,346" and significant(-150.2, 3, 100) == "-150"
    assert significant(999.94, 4, 1000) == "999.9" and significant(1000.4, 4, 1000) == "1,000"
