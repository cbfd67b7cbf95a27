"""The card cap of a team day's search (issue 58: a day of 100,000 requests has ~500
sessions in flight at its peak, past the old fixed 64) and an interval over it reported
as such — never as an answer, never mistaken for a plateau."""

from __future__ import annotations

from simulator.analysis.slo import parse_slo
from simulator.analysis.team_hours import (
    HourAnswer,
    Interval,
    TeamHours,
    card_cap,
    format_hours,
)


def test_the_cap_follows_the_days_sessions_in_flight() -> None:
    assert card_cap(12) == 64
    assert card_cap(485) == 485


def _day(over: HourAnswer) -> TeamHours:
    ok = HourAnswer(Interval(0, 28_800, 32_400, 50, in_flight=3), cards=2, done=True)
    return TeamHours(3600, 300, 64, [ok, over], 2.0)


def test_an_interval_over_the_cap_is_named_with_the_cap() -> None:
    over = HourAnswer(Interval(1, 32_400, 36_000, 900, in_flight=90), cards=None, done=True)
    h = _day(over)
    text = format_hours(h, (parse_slo("ttft_p95_s<=3"),))
    assert h.peak is None and h.card_hours() == (None, None)
    assert "  >64 " in text
    assert "peak: NOT FOUND — 09:00 not within 64 card(s), the cap" in text
    assert h.to_dict()["intervals"][1]["not_within_cap"] is True


def test_a_plateau_is_not_the_cap() -> None:
    flat = HourAnswer(Interval(1, 32_400, 36_000, 900, in_flight=90), cards=None, done=True,
                      plateau=True)
    text = format_hours(_day(flat), (parse_slo("ttft_p95_s<=3"),))
    assert "flat" in text and "more cards stop helping" in text and ">64" not in text
