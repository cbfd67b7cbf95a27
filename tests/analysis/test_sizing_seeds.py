"""The notebook's sizing path really reseeds its repeats (issue 27): before the fix,
`size` fell back to `lambda n, k: run_point(n)`, so the "repeat with another seed" was
the first run again, figure for figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from simulator import lab as nb
from simulator.analysis.sizing import format_sizing, parse_slo, size

SCENARIO = nb.scenario_path("claude-code-team")
OVERRIDES = ["turns=3"]


def test_a_repeat_runs_another_seed_and_its_rows_differ(tmp_path: Path) -> None:
    points = nb.TwinPoints(SCENARIO, OVERRIDES, tmp_path, twin="a40/qwen3-coder-30b-a3b-awq")
    res = size(points, [parse_slo("per_session_tok_s>=1")], 1, repeats=1,
               run_seeded=points.seeded)
    first, again = points.run_dirs[1]
    assert first != again
    rows = [pd.read_parquet(d / "turns.parquet").sort_values(["session_id", "turn_index"])
            for d in (first, again)]
    assert list(rows[0]["output_tokens"]) != list(rows[1]["output_tokens"])
    seeds = [nb.describe_run(d) for d in (first, again)]
    assert seeds[0] != seeds[1]
    assert res.reseeded and "repeat with another seed" in format_sizing(res)
    assert "SLOs judged on the steady-state window's figures" in format_sizing(res)


def test_without_a_seeded_runner_the_repeat_says_it_was_the_same_seed() -> None:
    def run(n: int) -> dict[str, Any]:
        return {"per_session_tok_s": 60.0 if n <= 3 else 40.0}

    res = size(run, [parse_slo("per_session_tok_s>=50")], 8, repeats=1)
    text = format_sizing(res)
    assert res.confirmed and not res.reseeded
    assert "repeat with the same seed" in text and "another seed" not in text
    assert "whole run's figures" in text
