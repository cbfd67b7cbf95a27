"""`size --interval` (issue 58) on a toy server: the fewest cards per interval, each
judged on its own requests; the peak interval first, the others from its answer; the
same answer serial and K probes at once; Ctrl-C gives the intervals judged so far,
marked interrupted; and the interval scenarios rebuild the day's calls exactly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simulator.analysis.metric_keys import SummaryRecord
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import parse_slo
from simulator.analysis.team_hours import TeamHours, format_hours
from simulator.scenario.model import Scenario
from simulator.scenario.replay import ReplaySpec
from simulator.sweep.pipeline import run_profile
from simulator.sweep.point import Point, PointResult, Target
from simulator.sweep.profiles import PointBase
from simulator.sweep.team_hours import TeamHoursProfile, interval_data, plan_intervals
from tests.sweep.toy import Wide


def _call(at: float, prompt: int) -> dict[str, Any]:
    return {"user": [{"kind": "text", "tokens": 100, "spans": "0"}], "at_s": at,
            "model_s": 2.0, "wait_kind": "tool",
            "usage": {"input_tokens": 10, "cache_read_tokens": prompt - 10,
                      "output_tokens": 50},
            "assistant": [{"kind": "text", "tokens": 50, "spans": "1"}]}


def _spec() -> ReplaySpec:
    """Three hours from 08:00: 6 requests, then 12 (one stream spans 09:00), then 4."""
    a = [_call(i * 600.0, 20_000 + 500 * i) for i in range(8)]       # 08:00–09:10
    b = [_call(i * 300.0, 20_000 + 500 * i) for i in range(10)]      # 09:05–09:50
    c = [_call(i * 600.0, 20_000 + 500 * i) for i in range(4)]       # 10:00–10:30
    return ReplaySpec.model_validate({
        "span_tokens": [100, 50], "span_kinds": "pp", "timing": "arrivals",
        "sessions": [{"id": "a", "calls": a}, {"id": "b", "start_offset_s": 3900.0,
                                                 "calls": b},
                     {"id": "c", "start_offset_s": 7200.0, "calls": c}],
        "team": {"source": "claude-code-otel", "day_start_unix_s": 0,
                 "replay_start_s": 28800, "replay_end_s": 39600, "sessions": 3,
                 "day_sessions": 3, "profile_step_s": 300, "day_profile": [1] * 288}})


NEED = {"08:00": 1, "09:00": 3, "10:00": 2}     # the toy server's cards per interval


Runner = Callable[[Point], PointResult]


def _profile(tmp: Path, width_asked: list[tuple[str, int]], target: Target | None = None
             ) -> tuple[TeamHoursProfile, Runner]:
    base = PointBase(str(tmp / "team.yaml"), (), tmp / "size", base_seed=0,
                     target=target or Target())
    data = {"name": "team", "seed": 0, "system": {"tokens": 18_000},
            "replay": _spec().model_dump(exclude_none=True)}

    def runner(p: Point) -> PointResult:
        iv, r = str(p.coords["interval"]), int(p.coords["replicas"])
        width_asked.append((iv, r))
        return PointResult(p, f"{iv}/{r}", "completed", "", RunSummary.from_json({}), 0.0, 0.0)

    def figures(run_dir: str, _lead: Sequence[int]) -> SummaryRecord:
        iv, r = run_dir.split("/")
        return {"ttft_p95_s": 1.0 if int(r) >= NEED[iv] else 2.0 + NEED[iv] - int(r)}

    prof = TeamHoursProfile(base, (parse_slo("ttft_p95_s<=2"),), _spec(), data,
                            figures=figures)
    return prof, runner


def test_cards_per_interval_peak_first(tmp_path: Path) -> None:
    asked: list[tuple[str, int]] = []
    prof, runner = _profile(tmp_path, asked)
    got: TeamHours = run_profile(prof, Wide(1), runner=runner)
    assert [h.cards for h in got.hours] == [1, 3, 2]
    assert [h.interval.requests for h in got.hours] == [6, 12, 4]
    assert asked[0] == ("09:00", 1)                 # the busiest interval first
    assert got.peak == 3 and got.card_hours() == (72.0, 6.0)
    assert [h.interval.start_s for h in got.binding_hours()] == [9 * 3600.0]
    assert got.hours[1].binding == ("ttft_p95_s<=2",)
    text = format_hours(got, prof.slos)
    assert "lower bound" in text and "fixed at the peak all day 72.0" in text
    assert (tmp_path / "size" / "progress.json").read_text().count('"done": 3')


def test_parallel_gives_the_serial_answer(tmp_path: Path) -> None:
    a: list[tuple[str, int]] = []
    b: list[tuple[str, int]] = []
    prof, runner = _profile(tmp_path / "a", a)
    serial = run_profile(prof, Wide(1), runner=runner)
    prof2, runner2 = _profile(tmp_path / "b", b)
    wide = run_profile(prof2, Wide(4), runner=runner2)
    assert [h.cards for h in wide.hours] == [h.cards for h in serial.hours]
    assert [[p.cards for p in h.probes] for h in wide.hours] == \
        [[p.cards for p in h.probes] for h in serial.hours]


def test_interrupted_is_never_the_answer(tmp_path: Path) -> None:
    asked: list[tuple[str, int]] = []
    prof, runner = _profile(tmp_path, asked)

    def cut(p: Point) -> PointResult:
        got = runner(p)
        if str(p.coords["interval"]) == "10:00":
            return PointResult(p, got.run_dir, "interrupted", "", got.summary, 0.0, 0.0)
        return got

    res = run_profile(prof, Wide(1), runner=cut)
    assert res.interrupted and not res.complete
    assert res.card_hours() == (None, None) and res.hours[1].cards == 3
    text = format_hours(res, prof.slos)
    assert text.startswith("INTERRUPTED") and "NOT the answer" in text
    assert res.to_dict()["status"].startswith("INTERRUPTED")


def test_intervals_rebuild_the_days_calls(tmp_path: Path) -> None:
    """One interval over the whole day with no lead-in rebuilds every call as imported;
    an interval's lead-in carries a stream spanning its start warm."""
    spec = _spec()
    data = {"name": "team", "seed": 0, "system": {"tokens": 18_000}, "sessions": 3,
            "turns": 10, "replay": spec.model_dump(exclude_none=True)}
    (iv, streams), = plan_intervals(spec, 86_400, 0)
    s = Scenario.model_validate({**interval_data(data, streams, iv, 0),
                                 "base_dir": str(tmp_path)})
    assert s.replay is not None
    assert [[(c.usage, c.at_s, c.model_s) for c in x.calls] for x in s.replay.sessions] == \
        [[(c.usage, c.at_s, c.model_s) for c in x.calls] for x in spec.sessions]
    nine = plan_intervals(spec, 3600, 300)[1]
    assert nine[0].lead == (1, 0) and nine[0].requests == 12   # a's 08:50 call, warm


def test_the_day_is_priced_per_card_whatever_probe_first_records_a_price(tmp_path: Path) -> None:
    """A twin fleet records the price of the R cards it rents; the day's $ are card-hours
    times one card's price. The first probe that records one here runs 2 cards (the
    1-card probe is decided early and records none): $/day must not double. On the
    100,000-request day the first such probe ran 79 cards and the $/day came out 79x."""
    card_usd = 0.44
    prof, _ = _profile(tmp_path, [])

    def runner(p: Point) -> PointResult:
        iv, r = str(p.coords["interval"]), int(p.coords["replicas"])
        if r == 1 and r < NEED[iv] and p.early is not None:
            return PointResult(p, f"{iv}/{r}", "interrupted", "stopped early",
                               RunSummary.from_json({}), 0.0, 0.0,
                               early="ttft_p95_s<=2 fails whatever the rest give")
        priced = RunSummary.from_json({"price_per_hour": card_usd * r})
        return PointResult(p, f"{iv}/{r}", "completed", "", priced, 0.0, 0.0)

    got: TeamHours = run_profile(prof, Wide(1), runner=runner)
    fixed, follow = got.card_hours()
    assert fixed is not None and follow is not None
    assert got.price_per_hour == card_usd
    assert got.usd() == (fixed * card_usd, follow * card_usd)


def test_a_price_given_per_card_is_kept(tmp_path: Path) -> None:
    """`--price-per-hour` is one card's: the probes record it as given, and the day's
    $ use it as it is."""
    prof, _ = _profile(tmp_path, [], Target(price_per_hour=2.5))

    def runner(p: Point) -> PointResult:
        iv, r = str(p.coords["interval"]), int(p.coords["replicas"])
        return PointResult(p, f"{iv}/{r}", "completed", "",
                           RunSummary.from_json({"price_per_hour": 2.5}), 0.0, 0.0)

    got: TeamHours = run_profile(prof, Wide(1), runner=runner)
    assert got.price_per_hour == 2.5
    assert got.usd() == (72.0 * 2.5, 6.0 * 2.5)
