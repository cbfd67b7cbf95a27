"""A run with recall probes, cut and resumed, equals the uninterrupted run: the same
turn rows and the same probe verdicts (compactions crossed counted over replayed turns)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.conftest import run_scenario, small_scenario, turns_of
from tests.reliability.test_reliability_resume import SAME, cut, resume

PROBE = ["session_id", "turn_index", "fact_id", "fact_retained", "probe_correct",
         "fact_age_turns", "fact_compactions_crossed", "probe_reason"]


def test_resumed_probe_run_matches(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(small_scenario(turns=30, probes={"facts": 6, "every_turns": 5}))
    full = turns_of(run_scenario(path, tmp_path / "a"))
    part = run_scenario(path, tmp_path / "b")
    rows = [json.loads(x) for x in (part.run_dir / "turns.jsonl").read_text().splitlines()]
    # cut after a probe, right before the next turn (a cut between a turn and its
    # probes loses them: the turn is replayed on resume, not probed again)
    at = next(i for i in range(len(rows) // 2, len(rows) - 1)
              if rows[i]["request_kind"] == "probe" and rows[i + 1]["request_kind"] == "turn")
    cut(part.run_dir, at + 1)
    merged = resume(part.run_dir, tmp_path / "b")

    def turns(df: pd.DataFrame) -> pd.DataFrame:
        t = df[df.ok & (df.request_kind != "probe")][SAME]
        return t.sort_values(SAME[:3]).reset_index(drop=True)

    def probes(df: pd.DataFrame) -> pd.DataFrame:
        p = df[df.request_kind == "probe"][PROBE]
        return p.sort_values(PROBE[:3]).reset_index(drop=True)
    pd.testing.assert_frame_equal(turns(full), turns(merged))
    pd.testing.assert_frame_equal(probes(full), probes(merged))
    assert (probes(merged)["fact_compactions_crossed"] > 0).any()
