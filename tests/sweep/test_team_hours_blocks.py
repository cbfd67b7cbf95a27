"""An interval's probe journals no KV block hashes (`NO_BLOCK_JOURNAL`, issue 58): the
same turn rows, figure for figure, as the imported day's default that journals them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator.sweep import api
from simulator.sweep.point import run_point
from simulator.sweep.team_hours import NO_BLOCK_JOURNAL
from tests.sweep.test_team_hours_ray import _day

WALL = ["run_id", "started_at"]           # the run's id and wall clock differ by nature


def test_no_block_journal_gives_the_same_rows(tmp_path: Path) -> None:
    base = api.search_base(_day(tmp_path), out=tmp_path / "res")
    rows = []
    for extra in ((), NO_BLOCK_JOURNAL):
        got = run_point(base.point(None, extra=("fleet.replicas=2", *extra),
                                   sub="off" if extra else "on"))
        assert got.status == "completed", got.reason
        run = Path(got.run_dir)
        assert (run / "blocks.jsonl").exists() == (not extra)
        rows.append(pd.read_parquet(run / "turns.parquet").drop(columns=WALL))
    assert len(rows[0]) > 10
    pd.testing.assert_frame_equal(rows[0], rows[1])
