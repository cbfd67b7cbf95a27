"""`size` on an imported team day (issue 52): one command answers the cards its busiest
hour needs under the SLOs, with the replay's fidelity and the day's concurrency
profile (telemetry and as replayed) printed and in size.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from tests.otel_export import team_day, write_json_logs


@pytest.mark.slow
def test_size_answers_cards_for_the_busiest_hour(tmp_path: Path) -> None:
    src = write_json_logs(tmp_path / "day.jsonl", team_day(seed=5, sessions=16, requests=(4, 10)))
    scen = tmp_path / "team.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(src), "-o", str(scen),
                                  "--busiest", "1h"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["size", str(scen), "--slo", "ttft_p95_s<=1.5",
                                  "--out", str(tmp_path / "out")])
    assert r.exit_code in (0, 1), r.output
    out = r.output
    assert "card(s)" in out and "replay fidelity" in out and "sessions in flight" in out
    folder = Path(out.strip().splitlines()[-1])
    data = json.loads((folder / "size.json").read_text())
    assert data["kind"] == "team" and data["team"]["window"] == "busiest 1h"
    probes = data["probes"]
    assert probes and probes[0]["replicas"] == 1
    if r.exit_code == 0:
        cards = data["cards"]
        assert cards >= 1 and any(p["replicas"] == cards and p["passed"] for p in probes)
        assert all(not p["passed"] for p in probes if p["replicas"] < cards)
    fid = data["fidelity"]
    assert fid["requests_replayed"] == fid["requests_recorded"] > 0
    assert fid["prompt_error_max"] <= 0.01
    rec, rep = data["team"]["profile_recorded"], data["team"]["profile_replayed"]
    assert len(rec) == len(rep) and max(rec) >= 1 and max(rep) >= 1
    assert max(data["team"]["day_profile"]) >= max(rec)
    r = CliRunner().invoke(main, ["report", str(folder)])
    assert r.exit_code == 0, r.output
    page = (folder / "sizing_report.html").read_text()
    assert "Sessions in flight against time" in page and "fidelity: within 1% and 1 s" in page
