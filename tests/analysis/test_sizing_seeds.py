"""The notebook's sizing path really reseeds its repeats (issue 27): the repeat with
another seed is another run whose rows differ, not the first run again."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator import lab as nb
from simulator.report.console import format_sizing

SCENARIO = nb.scenario_path("claude-code-team")
OVERRIDES = ["turns=3"]


def test_a_repeat_runs_another_seed_and_its_rows_differ(tmp_path: Path) -> None:
    res = nb.size(SCENARIO, ["per_session_tok_s>=1"], 1, OVERRIDES, tmp_path,
                  twin="a40/qwen3-coder-30b-a3b-awq", repeats=1)
    first, again = (Path(p.run_dir) for p in res.probes if p.sessions == 1)
    assert first != again
    rows = [pd.read_parquet(d / "turns.parquet").sort_values(["session_id", "turn_index"])
            for d in (first, again)]
    assert list(rows[0]["output_tokens"]) != list(rows[1]["output_tokens"])
    seeds = [nb.describe_run(d) for d in (first, again)]
    assert seeds[0] != seeds[1]
    assert res.reseeded and "repeat with another seed" in format_sizing(res)
    assert "SLOs judged on the steady-state window's figures" in format_sizing(res)
    again_res = nb.size(SCENARIO, ["per_session_tok_s>=1"], 1, OVERRIDES, tmp_path,
                        twin="a40/qwen3-coder-30b-a3b-awq", repeats=1)
    assert [p.run_dir for p in again_res.probes] == [p.run_dir for p in res.probes]  # reused
