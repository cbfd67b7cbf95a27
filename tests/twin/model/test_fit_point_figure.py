"""A fit point's figure read from its run's summary: a boolean is not a figure (JSON
`true` used to count as 1 tok/s)."""

from __future__ import annotations

import math

import pytest

from simulator.errors import InputError
from simulator.twin.model.fit import Observation, point_figure


def _obs(figure: str, batch: int = 1) -> Observation:
    return Observation.model_construct(kind="spec_decode", unit="ratio", label="p",
                                       figure=figure, batch=batch)


def test_the_figure_scaled_per_stream() -> None:
    assert point_figure({"aggregate_tok_s": 120}, _obs("aggregate_tok_s", 4)) == 120.0
    assert point_figure({"per_session_tok_s": 30.5}, _obs("per_session_tok_s", 4)) == 122.0


@pytest.mark.parametrize("bad", [True, None, "12", math.nan, math.inf, 0, -1.0])
def test_a_missing_or_non_number_figure_is_one_line(bad: object) -> None:
    with pytest.raises(InputError, match=r"its run has no aggregate_tok_s \(got "):
        point_figure({"aggregate_tok_s": bad}, _obs("aggregate_tok_s"))
