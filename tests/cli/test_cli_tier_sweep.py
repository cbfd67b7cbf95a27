"""`sweep`/`size --kv-offload-gib 0,64`: one sweep (search) per host KV tier size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")


@pytest.mark.slow
def test_sweep_and_size_run_once_per_tier(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["sweep", TEAM, "--sessions", "1,2", "--turns", "3",
                                  "--kv-offload-gib", "64,0", "--json", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(x["kv_offload_gib"], x["requested_sessions"]) for x in rows] == [
        (0.0, 1), (0.0, 2), (64.0, 1), (64.0, 2)]
    assert all(x["kv_tier"]["post_idle_ttft_p50_s"] is not None for x in rows)
    s = CliRunner().invoke(main, ["size", TEAM, "--slo", "ttft_p95_s<=30", "--turns", "3",
                                  "--max-sessions", "2", "--kv-offload-gib", "0,64", "--json",
                                  "--team", "4", "--out", str(tmp_path)])
    out = json.loads(s.stdout)
    assert [x["kv_offload_gib"] for x in out["rows"]] == [0.0, 64.0]
    assert all("binding_kind" in x and "cards" in x for x in out["rows"])
    assert s.exit_code == (0 if any(x["sessions"] > 0 for x in out["rows"]) else 1)
