"""The recorder's journal → DataFrame conversion: Arrow's reader must give the frame the
row-by-row reader gives, for any rows, a torn tail, an empty or missing journal."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.records.manifest import Manifest, parse_manifest
from simulator.records.recorder import (
    NULLABLE_INT_COLUMNS,
    TURNS_JOURNAL,
    Recorder,
    read_journal,
    turns_frame,
    turns_frame_from_journal,
)
from simulator.records.rows import COLUMNS, TurnRecord

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_opt_int = st.none() | st.integers(0, 2**40)
_opt_float = st.none() | st.floats(allow_nan=False, allow_infinity=False, width=64)

records = st.builds(
    TurnRecord, run_id=_text, session_id=_text, turn_index=st.integers(0, 10_000),
    request_kind=st.sampled_from(["turn", "summary"]), attempt=st.integers(1, 9),
    started_at=st.floats(0, 2e9), started_mono_s=st.floats(0, 1e6),
    context_tokens_est=st.integers(0, 10**6), reusable_prefix_tokens=st.integers(0, 10**6),
    max_tokens=st.integers(1, 64_000), turn_kind=_text, think_time_s=st.floats(0, 100),
    input_tokens=_opt_int, cache_read_tokens=_opt_int, cache_creation_tokens=_opt_int,
    prompt_tokens=_opt_int, output_tokens=_opt_int, output_tokens_est=_opt_int,
    ttft_s=_opt_float, decode_tok_s=_opt_float, turn_tok_s=_opt_float, e2e_s=_opt_float,
    stop_reason=st.none() | _text, compaction=st.none() | _text,
    error_type=st.none() | _text, error_message=st.none() | _text,
    http_status=st.none() | st.integers(100, 599), ok=st.booleans())


def _journal(run_dir: Path, rows: list[TurnRecord]) -> Path:
    rec = Recorder(run_dir, Manifest(run_id="t"))
    for r in rows:
        rec.write(r)
    rec.finalize("completed", None, (turns_frame([]), None))  # closes the journals
    return run_dir / TURNS_JOURNAL


def _same(path: Path) -> pd.DataFrame:
    """Both readers agree value for value; the nullable ints are Int64 in both."""
    old, new = turns_frame(read_journal(path)), turns_frame_from_journal(path)
    assert list(new.columns) == list(COLUMNS)
    pd.testing.assert_frame_equal(old, new, check_exact=True, check_dtype=False)
    for col in NULLABLE_INT_COLUMNS:
        assert str(new[col].dtype) == "Int64"
    return new


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(rows=st.lists(records, min_size=1, max_size=20))
def test_arrow_reader_matches_the_row_reader(tmp_path: Path, rows: list[TurnRecord]) -> None:
    run_dir = tmp_path / f"run{abs(hash(tuple(rows)))}"
    df = _same(_journal(run_dir, rows))
    assert len(df) == len(rows)
    assert df.iloc[-1].to_dict()["turn_index"] == rows[-1].turn_index


def _row(i: int, **over: Any) -> TurnRecord:
    base = TurnRecord("r", f"s{i}", i, "turn", 1, 1.5, 0.25 * i, 100, 50, 64, "read", 0.0)
    return TurnRecord(**{**base.to_row(), **over})


def test_torn_tail_and_unknown_fields_are_ignored(tmp_path: Path) -> None:
    path = _journal(tmp_path / "run", [_row(i, cache_read_tokens=i or None) for i in range(5)])
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({**_row(5).to_row(), "added_later": 1}) + "\n")
        f.write('{"run_id": "r", "session_id": "s6", "turn_in')      # a crash mid-write
    df = _same(path)
    assert list(df.session_id) == [f"s{i}" for i in range(6)]
    assert df.cache_read_tokens.isna().tolist() == [True] + [False] * 4 + [True]


def test_empty_or_missing_journal_is_an_empty_frame(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"run_id": "torn')
    for path in (empty, tmp_path / "missing.jsonl"):
        df = turns_frame_from_journal(path)
        assert df.empty and list(df.columns) == list(COLUMNS)


def test_rows_arrow_cannot_type_fall_back_to_the_row_reader(tmp_path: Path) -> None:
    """An int column holding 64.0 (a hand-edited or foreign journal): Arrow refuses it,
    the row reader takes it, and the frame is still made (never a lost summary)."""
    path = _journal(tmp_path / "run", [_row(0), _row(1, ttft_s=math.nan)])
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({**_row(2).to_row(), "max_tokens": 64.0}) + "\n")
    df = turns_frame_from_journal(path)
    assert len(df) == 3 and math.isnan(df.ttft_s.iloc[1])
    assert df.max_tokens.tolist() == [64, 64, 64]


@settings(max_examples=50, deadline=None)
@given(records)
def test_to_row_is_asdict(rec: TurnRecord) -> None:
    import dataclasses
    row = rec.to_row()
    assert row == dataclasses.asdict(rec)
    assert list(row) == list(COLUMNS)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rec=records, history=st.sampled_from([{}, {"kind": "reply", "n": 3},
                                             {"row": 1, "kind": "x"}, {"run": "other"}]),
       manifest=st.sampled_from([{}, {"run_id": "t"}, {"run_id": "t", "scenario_hash": "h"}]))
def test_success_lines_are_the_dumped_rows(tmp_path: Path, rec: TurnRecord,
                                           history: dict[str, Any],
                                           manifest: dict[str, Any]) -> None:
    """write_success splices the row's JSON into the history line: byte for byte what
    dumping the history row with the turn row in it gives."""
    run_dir = tmp_path / f"run{abs(hash((rec, str(history), str(manifest))))}"
    recorder = Recorder(run_dir, parse_manifest(manifest, "m"))
    recorder.write_success(history, rec)
    recorder.finalize("completed", None, (turns_frame([]), None))
    row = json.loads((run_dir / TURNS_JOURNAL).read_text())
    stamp = {k: v for k, v in (("run", manifest.get("run_id")),
                               ("scenario_hash", manifest.get("scenario_hash"))) if v is not None}
    expected = json.dumps({**stamp, **history, "row": row}, separators=(",", ":")) + "\n"
    assert (run_dir / "history.jsonl").read_text() == expected
    assert (run_dir / TURNS_JOURNAL).read_text() == json.dumps(row, separators=(",", ":")) + "\n"
