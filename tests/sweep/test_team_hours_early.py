"""`size --interval` with probes decided early (issue 58): a probe whose run stopped
once its verdict was FAIL counts as that failure, keeps its reason and no figures; a
plateau check that needs such a probe runs it again to the end first, so the answer is
the one full runs give; and on a real twin day the early verdicts are the full runs'."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from simulator.analysis.metric_keys import SummaryRecord
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import parse_slo
from simulator.analysis.team_hours import TeamHours, card_cap
from simulator.sweep import api
from simulator.sweep.fanout import Serial
from simulator.sweep.pipeline import run_profile
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase
from simulator.sweep.team_hours import TeamHoursProfile
from simulator.sweep.team_size import team_scenario
from tests.otel_export import team_day, write_json_logs
from tests.sweep.test_team_hours import NEED, _spec
from tests.sweep.toy import Wide

SLO = parse_slo("ttft_p95_s<=2")


def _toy(tmp: Path, flat_at: str | None, early: bool
         ) -> tuple[TeamHours, list[tuple[str, int, bool, bool]]]:
    """The toy day of `test_team_hours` (cards needed per interval: NEED); `flat_at`:
    that interval never passes and twice the cards fail by as much (a plateau); with
    `early`, a failing probe's run comes back decided early unless asked in full."""
    base = PointBase(str(tmp / "team.yaml"), (), tmp / "size", base_seed=0)
    data = {"name": "team", "seed": 0, "system": {"tokens": 18_000},
            "replay": _spec().model_dump(exclude_none=True)}
    asked: list[tuple[str, int, bool, bool]] = []

    def passes(iv: str, r: int) -> bool:
        return iv != flat_at and r >= NEED[iv]

    def runner(p: Point) -> PointResult:
        iv, r = str(p.coords["interval"]), int(p.coords["replicas"])
        asked.append((iv, r, p.early is not None, p.out_dir.endswith("-full")))
        if early and p.early is not None and not passes(iv, r):
            return PointResult(p, f"{iv}/{r}", "interrupted", "stopped early",
                               RunSummary.from_json({}), 0.0, 0.0,
                               early=f"{SLO} fails whatever the 3 judged request(s) …")
        return PointResult(p, f"{iv}/{r}", "completed", "", RunSummary.from_json({}),
                           0.0, 0.0)

    def figures(run_dir: str, _lead: Sequence[int]) -> SummaryRecord:
        iv, r = run_dir.split("/")
        return {"ttft_p95_s": 1.0 if passes(iv, int(r)) else 5.0 if iv == flat_at
                else 2.0 + NEED[iv] - int(r)}

    prof = TeamHoursProfile(base, (SLO,), _spec(), data, figures=figures,
                            capacity_estimate=False)
    return run_profile(prof, Wide(1), runner=runner), asked


@pytest.mark.parametrize("flat_at", [None, "10:00"])
def test_early_failures_give_the_full_runs_answer(tmp_path: Path, flat_at: str | None) -> None:
    full, _ = _toy(tmp_path / "full", flat_at, early=False)
    got, asked = _toy(tmp_path / "early", flat_at, early=True)
    assert [h.cards for h in got.hours] == [h.cards for h in full.hours]
    assert [h.plateau for h in got.hours] == [h.plateau for h in full.hours]
    assert [[(p.cards, p.passed) for p in h.probes] for h in got.hours] == \
        [[(p.cards, p.passed) for p in h.probes] for h in full.hours]
    decided = [p for h in got.hours for p in h.probes if p.early is not None]
    assert all(p.figures == {} and p.failed == (str(SLO),) for p in decided)
    assert bool(decided) == (flat_at is None)    # 10:00 on 1 card: decided early, kept
    assert all(h.binding == f.binding for h, f in zip(got.hours, full.hours, strict=True)
               if h.cards is not None and not any(p.early for p in h.probes
                                                  if p.cards == h.cards - 1))
    # 1 and 2 cards both failing (twice the cards): the plateau check needs their full
    # figures, so they run again to the end; 1 card passing at 08:00 needs none
    reran = sorted((iv, r) for iv, r, _e, full_run in asked if full_run)
    assert reran == sorted([("09:00", 1), ("09:00", 2)]
                           + ([(flat_at, 1), (flat_at, 2)] if flat_at else []))
    assert all(p.early is None for p in got.hours[1].probes if p.cards <= 2)
    if flat_at is not None:
        assert got.hours[2].plateau and got.hours[2].cards is None
    assert any(p["early_verdict"] for h in got.to_dict()["intervals"]
               for p in h["probes"]) == (flat_at is None)


def _day(tmp: Path) -> Path:
    logs = write_json_logs(tmp / "logs.jsonl", team_day(52, 40, requests=(10, 40)), batch=200)
    from simulator.importers.team_import import import_team
    out = tmp / "team.yaml"
    res = import_team([logs], "claude-code-otel", out_path=out)
    import yaml
    out.write_text(yaml.dump(res.data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                             sort_keys=False))
    return out


@pytest.mark.slow
def test_on_the_twin_an_early_verdict_is_the_full_runs_verdict(tmp_path: Path) -> None:
    """The docs' 40-session day on the twin: every probe the full search runs, run with
    early stopping, gives the same verdict — and some are decided early."""
    scenario = _day(tmp_path)
    slos = (parse_slo("ttft_p95_s<=3"), parse_slo("decode_tok_s_median>=40"))
    got: dict[bool, TeamHours] = {}
    for early in (False, True):
        base = api.search_base(scenario, out=tmp_path / f"early-{early}")
        spec, data = team_scenario(base)
        assert spec is not None and spec.team is not None
        prof = TeamHoursProfile(base, slos, spec, data,
                                max_replicas=card_cap(max(spec.team.day_profile)),
                                early_stop=early, capacity_estimate=False)
        got[early] = run_profile(prof, Serial())
    full, early_ = got[False], got[True]
    assert [h.cards for h in early_.hours] == [h.cards for h in full.hours]
    pairs = [(e, f) for he, hf in zip(early_.hours, full.hours, strict=True)
             for e, f in zip(he.probes, hf.probes, strict=True)]
    assert all(e.cards == f.cards and e.passed == f.passed for e, f in pairs)
    decided = [(e, f) for e, f in pairs if e.early is not None]
    assert decided
    assert all(e.failed[0] in f.failed for e, f in decided)   # the SLO the full run fails
