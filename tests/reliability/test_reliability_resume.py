"""Resume: a run cut anywhere and resumed equals the uninterrupted run, turn by turn."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.conftest import run_scenario, small_scenario, turns_of

# Client-side columns that depend only on the seed and the server's replies.
SAME = ["session_id", "turn_index", "request_kind", "turn_kind", "context_tokens_est",
        "max_tokens", "output_tokens", "compaction", "compaction_messages_removed"]


def cut(run_dir: Path, keep_rows: int, status: str = "interrupted") -> None:
    """Simulate a run killed after `keep_rows` journal rows (history written first)."""
    lines = (run_dir / "turns.jsonl").read_text().splitlines(keepends=True)[:keep_rows]
    kept = {(r["session_id"], r["turn_index"], r["request_kind"])
            for r in map(json.loads, lines) if r["ok"]}
    hist = [h for h in (run_dir / "history.jsonl").read_text().splitlines(keepends=True)
            if (json.loads(h).get("session"), json.loads(h).get("turn"),
                json.loads(h).get("kind")) in kept]
    (run_dir / "turns.jsonl").write_text("".join(lines) + '{"torn": ')
    (run_dir / "history.jsonl").write_text("".join(hist))
    m = json.loads((run_dir / "manifest.json").read_text())
    m["status"] = status
    (run_dir / "manifest.json").write_text(json.dumps(m))
    (run_dir / "turns.parquet").unlink()


def resume(run_dir: Path, out: Path) -> pd.DataFrame:
    res = execute(RunSpec("", out_dir=out, show_progress=False, resume_dir=run_dir),
                  echo=lambda s: None)
    assert res.status == "completed" and res.run_dir == run_dir
    return turns_of(res)


def _key(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.ok][SAME].sort_values(SAME[:3]).reset_index(drop=True)


@pytest.mark.parametrize("over", [
    {"sessions": 2, "turns": 30},
    {"sessions": 1, "turns": 24, "history": "scripted"},
    {"sessions": 1, "turns": 26, "compaction": {"kind": "summarize", "threshold_tokens": 3000,
                                                "summary_max_tokens": 150, "keep_messages": 4}},
], ids=["live-block", "scripted", "summarize"])
def test_resumed_run_matches_the_uninterrupted_one(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                   over: dict[str, object]) -> None:
    path = write_scenario(small_scenario(**over))
    full = turns_of(run_scenario(path, tmp_path / "a"))
    part = run_scenario(path, tmp_path / "b")
    n = len(full)
    cut(part.run_dir, n // 2)
    merged = resume(part.run_dir, tmp_path / "b")
    pd.testing.assert_frame_equal(_key(full), _key(merged))
    assert not merged.duplicated(["session_id", "turn_index", "request_kind", "attempt"]).any()
    # The timeline continues after the first part instead of restarting at zero.
    assert merged.started_mono_s.iloc[n // 2] >= merged.started_mono_s.iloc[n // 2 - 1]
    m = json.loads((part.run_dir / "manifest.json").read_text())
    assert m["status"] == "completed" and len(m["resumes"]) == 1
    assert m["resumes"][0]["from_status"] == "interrupted"
    assert m["resumes"][0]["rows_before"] == n // 2


def test_failed_attempts_keep_their_numbers_after_resume(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A turn cancelled in flight is sent again on resume as its next attempt."""
    path = write_scenario(small_scenario(turns=6))
    part = run_scenario(path, tmp_path)
    lines = (part.run_dir / "turns.jsonl").read_text().splitlines()
    row = json.loads(lines[3])
    row.update(ok=False, error_type="cancelled", output_tokens=None)
    (part.run_dir / "turns.jsonl").write_text("\n".join([*lines[:3], json.dumps(row)]) + "\n")
    cut(part.run_dir, 4)
    merged = resume(part.run_dir, tmp_path)
    t3 = merged[merged.turn_index == 3]
    assert list(t3.attempt) == [1, 2] and list(t3.ok) == [False, True]
    assert len(merged[merged.ok]) == 6


def test_resume_refuses_completed_and_overrides(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = run_scenario(write_scenario(small_scenario(turns=3)), tmp_path)
    with pytest.raises(InputError, match="already completed"):
        execute(RunSpec("", out_dir=tmp_path, resume_dir=done.run_dir), echo=lambda s: None)
    cut(done.run_dir, 1)
    with pytest.raises(InputError, match="overrides"):
        execute(RunSpec("", ["turns=9"], out_dir=tmp_path, resume_dir=done.run_dir),
                echo=lambda s: None)
    with pytest.raises(InputError, match="manifest.json: missing"):
        execute(RunSpec("", out_dir=tmp_path, resume_dir=tmp_path / "nope"), echo=lambda s: None)
