"""A run given an early rule (`RunSpec.early`, issue 58) stops once its verdict is
decided: status interrupted, the reason in its outcome and manifest, fewer rows than
the whole run; the same run without it goes to its end."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd

from simulator.analysis.early_verdict import EarlyRule
from simulator.analysis.slo import parse_slo
from simulator.sweep import api
from simulator.sweep.point import run_point
from tests.sweep.test_team_hours_ray import _day


def test_a_run_stops_once_its_verdict_is_decided(tmp_path: Path) -> None:
    base = api.search_base(_day(tmp_path), out=tmp_path / "res")
    whole = run_point(base.point(None, sub="whole"))
    assert whole.status == "completed" and whole.early is None
    n = len(pd.read_parquet(Path(whole.run_dir) / "turns.parquet"))
    # one judged request in all: its answer decides a TTFT bound no reply meets
    rule = EarlyRule((parse_slo("ttft_p95_s<=0.000001"),), 1, every=1)
    cut = run_point(replace(base.point(None, sub="early"), early=rule))
    assert cut.status == "interrupted" and cut.early is not None
    assert cut.early.startswith("ttft_p95_s<=1e-06 fails whatever the 0 judged")
    manifest = json.loads((Path(cut.run_dir) / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["status_reason"].startswith("stopped early, its verdict decided")
    assert len(pd.read_parquet(Path(cut.run_dir) / "turns.parquet")) < n
