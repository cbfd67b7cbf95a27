"""One short warm-started team run's rows, for tests that run it twice in one process
(the per-process memos a search's probes share must not change a row)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator.run.execute import execute
from simulator.run.spec import RunSpec

TEAM = str(Path(__file__).resolve().parents[1] / "scenarios" / "claude-code-team.yaml")


def team_rows(tmp: Path, *overrides: str) -> pd.DataFrame:
    """The rows of 12 warm-started turns of the team scenario (plus `overrides`), less
    the columns that name the run."""
    res = execute(RunSpec(TEAM, ["turns=12", "load.warm_start=true", *overrides], out_dir=tmp,
                          show_progress=False), echo=lambda s: None)
    assert res.status == "completed", res.outcome.reason
    t = pd.read_parquet(res.run_dir / "turns.parquet")
    return t.drop(columns=["run_id", "started_at"]).reset_index(drop=True)
