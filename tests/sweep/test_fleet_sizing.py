"""The fleet search behind `size --team M --router …` (`sweep/size.py` FleetProfile, the
answer in `analysis/fleet_sizing.py`), on toy fleets through the pipeline."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import failures, parse_slo
from simulator.report.sweeps import format_fleet_sizing
from simulator.sweep.card_size import FleetProfile
from simulator.sweep.pipeline import run_profile
from simulator.sweep.point import Point, PointResult
from tests.sweep.toy import BASE, Wide

SLOS = (parse_slo("per_session_tok_s>=50"),)


def _fleet(k: int, calls: list[int]) -> Any:
    """A toy fleet: it meets the SLO from k replicas up."""
    def run(p: Point) -> PointResult:
        r = p.coords["replicas"]
        calls.append(r)
        return PointResult(p, f"run-{r}", "completed", "", RunSummary.from_json(
            {"per_session_tok_s": 60.0 if r >= k else 40.0, "steady_state": True,
             "fleet": {"cache_read_share": 0.9, "load_imbalance": 1.0}}), 0.0, 0.0)
    return run


def _size(k: int, start: int | None, calls: list[int], *, width: int = 1,
          max_replicas: int = 64, router: str = "session_affinity") -> Any:
    profile = FleetProfile(BASE, SLOS, 100, router, start, max_replicas)
    return run_profile(profile, Wide(width), runner=_fleet(k, calls))


@given(k=st.integers(1, 40), start=st.one_of(st.none(), st.integers(1, 40)),
       width=st.integers(1, 4))
def test_the_smallest_passing_fleet_is_found_from_any_start(k: int, start: int | None,
                                                             width: int) -> None:
    calls: list[int] = []
    res = _size(k, start, calls, width=width)
    assert res.replicas == k
    assert len(calls) == len(set(calls))          # no fleet run twice


def test_division_start_that_already_passes_walks_down() -> None:
    calls: list[int] = []
    res = _size(3, 5, calls, router="prefix_aware")
    assert res.replicas == 3 and calls == [5, 4, 3, 2]
    text = format_fleet_sizing(res)
    assert "needs 3 replica(s) (division said 5)" in text and "R=  2: FAIL" in text
    assert res.to_dict()["probes"][0]["fleet"]["cache_read_share"] == 0.9


def test_no_fleet_within_the_cap() -> None:
    res = _size(99, 2, [], max_replicas=8)
    assert res.replicas is None and "more than 8 replicas" in format_fleet_sizing(res)


def test_a_fleet_that_never_reached_steady_state_fails() -> None:
    assert failures({"per_session_tok_s": 80.0, "steady_state": False,
                     "steady_state_reason": "too short"}, SLOS) == ("not steady: too short",)
    assert failures({"per_session_tok_s": 80.0}, SLOS) == ()
