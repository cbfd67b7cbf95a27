"""The engine log samples the gauges for every run size (issue 27): with one session no
other timer stopped the engine, so each request ran to completion (its KV freed) before
a sample was taken, and a one-session report's KV-usage and running/waiting panels were
flat at 0 while its summary said KV peak 8.3%."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.conftest import SCENARIOS, run_scenario, turns_of


def test_one_session_timeline_shows_the_kv_usage_its_summary_peaks_at(tmp_path: Path) -> None:
    res = run_scenario(SCENARIOS / "claude-code-endurance.yaml", tmp_path, ["turns=8"])
    assert res.status == "completed"
    peak = res.summary["kv_usage_peak"]
    assert peak > 0
    m = pd.read_parquet(res.run_dir / "server_metrics.parquet")
    kv = m[m.metric == "kv_usage"].value
    running = m[m.metric == "requests_running"].value
    assert kv.max() > 0.5 * peak and kv.max() <= peak + 1e-9
    assert running.max() == 1
    assert len(turns_of(res)) == 8
