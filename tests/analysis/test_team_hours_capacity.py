"""The peak interval's first probe from a capacity estimate (issue 58): requests in
flight at once, the batch a card decodes at the SLO's floor, one card under it."""

from __future__ import annotations

from simulator.analysis.team_hours import batch_at_speed, capacity_start, peak_overlap


def test_peak_overlap_counts_spans_open_at_once_from_any_iterable() -> None:
    spans = [(0.0, 10.0), (5.0, 15.0), (10.0, 20.0), (30.0, 31.0)]
    assert peak_overlap(iter(spans)) == 2       # a generator, read once
    assert peak_overlap(s for s in spans) == 2
    assert peak_overlap([]) == 0
    assert peak_overlap([(0.0, 1.0), (1.0, 2.0)]) == 1    # one ends as the next starts


def test_batch_at_speed_is_the_largest_batch_meeting_the_floor() -> None:
    def speed(b: int) -> float:
        return 100.0 / b                         # 100, 50, 33.3, 25 … tok/s each
    assert batch_at_speed(speed, 40.0, 64) == 2
    assert batch_at_speed(speed, 200.0, 64) == 1      # not even one: one
    assert batch_at_speed(speed, 1.0, 8) == 8         # capped by the engine's batch


def test_capacity_start_is_one_card_under_the_estimate() -> None:
    assert capacity_start(23, 3) == 7            # ⌈23 / 3⌉ = 8, one under
    assert capacity_start(2, 3) == 1
    assert capacity_start(0, 0) == 1
