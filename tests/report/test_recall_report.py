"""The report of a run with recall probes: the recall row and the recall-vs-age plot;
its speed plots read the turns without the probe rows."""

from __future__ import annotations

from pathlib import Path

import yaml

from simulator.report.html import render_report
from tests.conftest import run_scenario, small_scenario


def test_report_shows_recall_beside_speed(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(small_scenario(turns=24, probes={"facts": 4, "every_turns": 6})))
    res = run_scenario(p, tmp_path / "out")
    paths = render_report(res.run_dir)
    assert (res.run_dir / "recall_vs_age.png") in paths.images
    md = paths.markdown.read_text(encoding="utf-8")
    assert "probe recall / fact retention (95% CI)" in md
    assert "recall = retention by construction" in md
    assert res.summary["ok_turns"] == 24 and res.summary["probe_requests"] > 0
