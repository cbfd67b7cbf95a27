"""Soak tests: the HTTP twin with mixed faults, and SIGINT then --resume (real processes)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pandas as pd
import pytest

from tests.reliability_twin import TwinThread, endurance, soak_scenario, wait_rows, write_yaml

KEY = ["session_id", "turn_index", "request_kind", "attempt"]
FAULTS = "429:0.02,529:0.02,500:0.02,disconnect:0.01,error_event:0.01,malformed:0.01,stall:0.01:30"


def _check_dir(run_dir: Path, sessions: int, turns: int, server_requests: int) -> pd.DataFrame:
    df = pd.read_parquet(run_dir / "turns.parquet")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(df) == server_requests            # every request sent is accounted for
    assert not df.duplicated(KEY).any()          # exactly once
    ok = df[df.ok & (df.request_kind == "turn")]
    assert len(ok) == sessions * turns and ok.groupby("session_id").size().eq(turns).all()
    assert summary["requests"] == len(df) and summary["ok_turns"] == len(ok)
    assert summary["failed_requests"] == int(
        (~df.ok & ~df.error_type.isin(["cancelled", "context_overflow"])).sum())
    return df


@pytest.mark.slow
def test_soak_mixed_faults(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "soak.yaml", soak_scenario())
    with TwinThread(faults=FAULTS) as twin:
        proc = endurance("run", str(path), "--endpoint", twin.url, "--out", str(tmp_path),
                         "--quiet")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out[-2000:], err[-2000:])
        run_dir = Path(out.strip().splitlines()[-1])
        df = _check_dir(run_dir, 8, 150, twin.messages)
    failed = df[~df.ok]
    assert len(failed) > 0.05 * len(df)          # the faults did happen …
    kinds = set(failed.error_type)
    assert {"rate_limited", "overloaded", "server_error", "timeout"} <= kinds, kinds
    assert kinds & {"disconnect", "stream_error", "malformed_stream"}
    assert failed.e2e_s.notna().all() and (failed.attempt >= 1).all()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["rows"] == len(df)


@pytest.mark.slow
def test_soak_sigint_then_resume(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "soak.yaml", soak_scenario(sessions=4, turns=60))
    with TwinThread(faults="429:0.02,500:0.03") as twin:
        proc = endurance("run", str(path), "--endpoint", twin.url, "--out", str(tmp_path),
                         "--quiet", "--stop-grace-s", "5")
        run_dir = wait_rows(tmp_path, 60, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, (out[-2000:], err[-2000:])
        assert "status: interrupted" in out and out.strip().splitlines()[-1] == str(run_dir)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "interrupted"
        part = pd.read_parquet(run_dir / "turns.parquet")
        assert len(part) == twin.messages and 60 <= len(part) < 240
        assert not part.duplicated(KEY).any()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["requests"] == len(part) and summary["status"] == "interrupted"

        proc = endurance("run", "--resume", str(run_dir), "--quiet")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out[-2000:], err[-2000:])
        df = _check_dir(run_dir, 4, 60, twin.messages)
    assert len(df) > len(part)
    cols = [*KEY, "ok", "started_at", "e2e_s", "context_tokens_est"]   # the first part is kept
    pd.testing.assert_frame_equal(df.iloc[:len(part)][cols].reset_index(drop=True),
                                  part[cols].reset_index(drop=True), check_dtype=False)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["resumes"][0]["from_status"] == "interrupted"
