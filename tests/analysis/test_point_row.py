"""Typed rows: a sweep row is the typed record of its run's summary and coordinates,
written to JSON exactly as before, and rows of every age read back as typed records."""

from __future__ import annotations

import json

from simulator.analysis import metrics_registry as registry
from simulator.analysis.point_row import read_point_row, read_point_rows, sweep_row
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.sizing import upgrade_point_row


def test_a_row_holds_every_figure_and_the_sweep_facts_after_its_coordinates() -> None:
    s = RunSummary.from_json({"per_session_tok_s": 12.0, "requested_sessions": 4,
                              "window_per_session_tok_s": 11.0, "steady_state": True,
                              "simulated": True, "status": "completed"})
    row = sweep_row({"requested_sessions": 4, "seed_offset": 1}, s)
    assert list(row)[:2] == ["requested_sessions", "seed_offset"]
    assert list(row)[2:] == [k for k in (*registry.NUMERIC_KEYS, *registry.SWEEP_FACT_KEYS)
                             if k != "requested_sessions"]
    assert row["window_per_session_tok_s"] == 11.0 and row["steady_state"] is True
    assert "status" not in row                        # a run fact, not a sweep fact
    # the same row from the run's summary.json (a plain record) is the same dict
    assert sweep_row({"requested_sessions": 4, "seed_offset": 1}, s.record()) == row
    assert json.loads(json.dumps(row)) == row


def test_an_old_row_reads_under_todays_names() -> None:
    old = {"sessions": 8, "per_session_tok_s": 20.0, "run_per_session_tok_s": 18.0,
           "aggregate_tok_s": 160.0, "run_aggregate_tok_s": 150.0, "run_dirs": ["a"]}
    row = read_point_row(old)
    assert row["requested_sessions"] == 8 and "sessions" not in row
    assert row["window_per_session_tok_s"] == 20.0 and row["per_session_tok_s"] == 18.0
    assert row["window_aggregate_tok_s"] == 160.0 and row["aggregate_tok_s"] == 150.0
    assert row["run_dirs"] == ["a"]
    assert upgrade_point_row(old) == row             # the old name still reads old rows
    today = {"requested_sessions": 2, "window_per_session_tok_s": 5.0}
    assert read_point_rows([today]) == [today]      # a row of today passes unchanged
