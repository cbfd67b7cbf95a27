"""The fleet search behind `size --team M --router …` (`analysis/fleet_sizing.py`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.analysis.fleet_sizing import format_fleet_sizing, judge, size_fleet
from simulator.analysis.sizing import parse_slo

SLOS = [parse_slo("per_session_tok_s>=50")]


def _fleet_needing(k: int, calls: list[int]) -> Any:
    def run(r: int) -> dict[str, Any]:
        calls.append(r)
        return {"per_session_tok_s": 60.0 if r >= k else 40.0, "steady_state": True,
                "fleet": {"cache_read_share": 0.9, "load_imbalance": 1.0}}
    return run


@given(k=st.integers(1, 40), start=st.one_of(st.none(), st.integers(1, 40)))
def test_the_smallest_passing_fleet_is_found_from_any_start(k: int, start: int | None) -> None:
    calls: list[int] = []
    res = size_fleet(_fleet_needing(k, calls), SLOS, 100, "session_affinity", start=start)
    assert res.replicas == k
    assert len(calls) == len(set(calls))          # no fleet run twice


def test_division_start_that_already_passes_walks_down() -> None:
    calls: list[int] = []
    res = size_fleet(_fleet_needing(3, calls), SLOS, 100, "prefix_aware", start=5)
    assert res.replicas == 3 and calls == [5, 4, 3, 2]
    text = format_fleet_sizing(res)
    assert "needs 3 replica(s) (division said 5)" in text and "R=  2: FAIL" in text
    assert res.to_dict()["probes"][0]["cache_read_share"] == 0.9


def test_no_fleet_within_the_cap() -> None:
    res = size_fleet(_fleet_needing(99, []), SLOS, 10, "round_robin", start=2, max_replicas=8)
    assert res.replicas is None and "more than 8 replicas" in format_fleet_sizing(res)


def test_a_fleet_that_never_reached_steady_state_fails() -> None:
    assert judge({"per_session_tok_s": 80.0, "steady_state": False,
                  "steady_state_reason": "too short"}, tuple(SLOS)) == ("not steady: too short",)
    assert judge({"per_session_tok_s": 80.0}, tuple(SLOS)) == ()
    with pytest.raises(TypeError):
        size_fleet(_fleet_needing(1, []), SLOS, 10, "round_robin")  # type: ignore[call-arg]
