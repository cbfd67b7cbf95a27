"""One rule for what counts as a number: a boolean never does, nor text; a figure is
also finite."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.util.numbers import finite_float, is_number


@pytest.mark.parametrize(("x", "want"), [
    (3, 3.0), (2.5, 2.5), (-1, -1.0), (0, 0.0), (np.int64(7), 7.0), (np.float32(0.5), 0.5),
    (True, None), (False, None), (np.bool_(True), None), ("1.5", None), (None, None),
    ([1], None), (math.nan, None), (math.inf, None), (-math.inf, None), (10 ** 400, None),
])
def test_finite_float(x: object, want: float | None) -> None:
    got = finite_float(x)
    assert got == want and (got is None or type(got) is float)


@pytest.mark.parametrize(("x", "want"), [
    (1, True), (1.5, True), (math.nan, True), (True, False), (False, False), ("1", False),
    (None, False),
])
def test_is_number_refuses_booleans_and_text(x: object, want: bool) -> None:
    assert is_number(x) is want
