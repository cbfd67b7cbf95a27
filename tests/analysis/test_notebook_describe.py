"""Notebooks print what a run was before any figure (issue 16, item 8)."""

from __future__ import annotations

from pathlib import Path

from simulator.analysis.notebook import describe_run
from tests.conftest import run_scenario, small_scenario
from tests.http_twin import twin_in_thread


def test_describe_run_names_hardware_model_and_settings(tmp_path: Path, write_scenario) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(small_scenario(turns=3))
    res = run_scenario(path, tmp_path, ["seed=5"], twin="h100/llama-3.1-8b")
    text = describe_run(res.run_dir)
    assert "in-process twin (SIMULATED): hardware h100, model llama-3.1-8b (bf16)" in text
    assert "1 session(s) × 3 turns, compaction block, seed 5, overrides seed=5" in text
    with twin_in_thread(time_scale=500.0) as url:
        res = run_scenario(path, tmp_path, endpoint_url=url)
    text = describe_run(res.run_dir)
    assert f"HTTP twin at {url} (SIMULATED, time scale 500.0): hardware a40" in text
