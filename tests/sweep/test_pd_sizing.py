"""`size --team M --pd`: the split search as data (`sweep.pd_size`, `analysis.pd_sizing`),
driven with made-up figures, and `sweep --pd` end to end."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.analysis.pd_sizing import splits
from simulator.analysis.slo import parse_slo
from simulator.cli import main
from simulator.report.pd import format_pd_sizing
from simulator.sweep.pd_size import PDProfile
from simulator.sweep.point import Point
from simulator.sweep.profiles import PointBase
from tests.conftest import SCENARIOS

TEAM = SCENARIOS / "claude-code-team.yaml"


@dataclass
class _Result:
    summary: Mapping[str, Any]
    ok: bool = True

    def raise_error(self, what: str) -> None:
        return None


def _over(point: Point, key: str) -> int | None:
    vals = [o.split("=", 1)[1] for o in point.overrides if o.startswith(key + "=")]
    return int(vals[-1]) if vals else None


def _fake(point: Point) -> _Result:
    """Per-session speed of a made-up fleet: aggregated holds 18 sessions a card; a P/D
    split holds 24 per decode card when P ≥ D / 4, else 10."""
    r, p = _over(point, "fleet.replicas") or 1, _over(point, "fleet.prefill") or 0
    team = _over(point, "sessions") or 1
    cap = r * 18 if p == 0 else r * (24 if 4 * p >= r else 10)
    speed = 60.0 * min(1.0, cap / team)
    return _Result({"window_per_session_tok_s": speed, "steady_state": True,
                    "requested_sessions": team,
                    "window_goodput_tok_s": speed * team, "price_per_hour": 2.5 * (r + p)})


def _drive(profile: PDProfile) -> Any:
    gen = profile.plan(1)
    batch = next(gen)
    try:
        while True:
            batch = gen.send([_fake(pt) for pt in batch])
    except StopIteration as stop:
        return stop.value


def test_splits_cover_a_quarter_a_third_and_half_of_the_cards() -> None:
    assert splits(1) == [] and splits(2) == [(1, 1)]
    assert splits(4) == [(1, 3), (2, 2)] and splits(12) == [(3, 9), (4, 8), (6, 6)]
    assert all(p >= 1 and d >= 1 for n in range(2, 40) for p, d in splits(n))


def test_the_search_finds_the_fewest_cards_and_puts_aggregated_beside(tmp_path: Path) -> None:
    base = PointBase(str(TEAM), (), tmp_path, 11)
    slo = (parse_slo("per_session_tok_s>=50"),)
    res = _drive(PDProfile(base, slo, team_sessions=96, start=4))
    # aggregated: 18 a card at ≥ 50 of 60 tok/s → 5 cards (4 × 18 = 72: 45 tok/s fails)
    assert res.aggregated == 5
    # P/D: 24 per decode card with P ≥ D/4: 1:4 → 96 ✓ (5 cards); 4 cards: 1:3 → 72 ✗
    assert res.split == (1, 4)
    beside = res.beside()
    assert beside["cards"] == 5 and beside["aggregated"]["passed"] is True
    assert beside["aggregated"]["goodput_per_card_tok_s"] == pytest.approx(60 * 90 / 5)
    assert beside["pd"]["goodput_per_card_tok_s"] == pytest.approx(60 * 96 / 5)
    text = format_pd_sizing(res)
    assert "P/D needs 5 card(s) as 1 prefill : 4 decode" in text
    assert json.dumps(res.to_dict(), default=str)


@pytest.mark.slow
def test_sweep_over_splits_tags_its_rows(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["sweep", str(TEAM), "--twin", "h100/qwen3-coder-30b-a3b-awq",
                                    "--sessions", "2", "--turns", "2", "--pd", "1:1,1:2",
                                    "--json", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output.strip().splitlines()[-1])
    rows = data if isinstance(data, list) else data["rows"]
    assert sorted(r["pd"] for r in rows) == ["1:1", "1:2"]
    assert all(r["prefill"] == 1 for r in rows) and sorted(r["decode"] for r in rows) == [1, 2]
