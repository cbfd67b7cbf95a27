"""The team search over cards (issue 52) on toy servers: the fewest cards meeting the
SLOs on the whole replay's figures (no steady-state verdict), the plateau stop when
more cards no longer help, and the same answer run K probes at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import parse_slo
from simulator.analysis.team_day import TeamSizing
from simulator.scenario.replay import ReplaySpec
from simulator.sweep.pipeline import run_profile
from simulator.sweep.point import Point, PointResult
from simulator.sweep.team_size import TeamSizeProfile
from tests.sweep.toy import BASE, Wide

SPEC = ReplaySpec.model_validate({
    "sessions": [{"id": "a", "calls": [{"usage": {"input_tokens": 5, "output_tokens": 5}}]}],
    "timing": "arrivals",
    "team": {"source": "claude-code-otel", "day_start_unix_s": 0, "replay_start_s": 36000,
             "replay_end_s": 39600, "sessions": 1, "day_sessions": 1, "profile_step_s": 300,
             "day_profile": [1] * 288}})


def _run(ttft: Callable[[int], float], width: int = 1) -> tuple[TeamSizing, list[int]]:
    asked: list[int] = []

    def runner(p: Point) -> PointResult:
        r = int(p.coords["replicas"])
        asked.append(r)
        summary: dict[str, Any] = {"ttft_p95_s": ttft(r), "window_ttft_p95_s": 99.0,
                                   "requested_sessions": 1, "steady_state": False,
                                   "steady_state_reason": "ramp longer than the sessions"}
        return PointResult(p, f"/nonexistent/run-{r}", "completed", "",
                           RunSummary.from_json(summary), 0.0, 0.0)

    prof = TeamSizeProfile(BASE, (parse_slo("ttft_p95_s<=2"),), SPEC)
    return run_profile(prof, Wide(width), runner=runner), asked


def test_fewest_cards_on_the_whole_replay() -> None:
    res, asked = _run(lambda r: 12.0 / r)          # passes from 6 cards
    assert res.replicas == 6 and not res.notes
    assert [p.replicas for p in res.probes] == sorted(set(asked), key=asked.index)
    assert all(not p.passed for p in res.probes if p.replicas < 6)
    wide, _ = _run(lambda r: 12.0 / r, width=4)
    assert wide.replicas == 6


def test_plateau_stops_the_search() -> None:
    res, asked = _run(lambda r: 3.0 + 8.0 / r ** 2)   # never below 3 s
    assert res.replicas is None and res.notes and "more cards stop helping" in res.notes[0]
    assert max(asked) < 64
