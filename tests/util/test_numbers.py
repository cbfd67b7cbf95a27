"""One rule for what counts as a number: a boolean never does, nor text; a figure is
also finite."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.util.numbers import finite_float, is_number, to_float, to_int


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


@pytest.mark.parametrize("x", [3, 2.5, "1.5", " 7 ", True, np.int64(7), np.float32(0.5),
                               np.float64(-2.0), 10 ** 30, None, [1], "x", {"a": 1}])
@pytest.mark.parametrize(("ours", "builtin"), [(to_float, float), (to_int, int)])
def test_to_float_and_to_int_answer_as_the_builtins_do(x: object, ours: object,
                                                       builtin: type) -> None:
    """The narrowing of a value mypy cannot type gives what `float()` / `int()` give, and
    refuses what they refuse with the same error and wording."""
    assert callable(ours)
    try:
        want: object = builtin(x)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)) as got:
            ours(x)
        assert str(got.value) == str(exc)
    else:
        assert ours(x) == want and type(ours(x)) is builtin
