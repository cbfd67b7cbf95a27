"""Warm-started histories are shared by the runs of one process (a search's serial
points): a run that finds them synthesised by an earlier run gives the rows it gives
alone, and only sessions of the same scenario, seed and prefix share them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from simulator.session import agent
from simulator.session.runner import warm_start_turn

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")
WARM = ("turns=12", "load.warm_start=true")


def _rows(tmp: Path, *overrides: str) -> pd.DataFrame:
    res = execute(RunSpec(TEAM, [*WARM, *overrides], out_dir=tmp, show_progress=False),
                  echo=lambda s: None)
    assert res.status == "completed", res.outcome.reason
    t = pd.read_parquet(res.run_dir / "turns.parquet")
    return t.drop(columns=["run_id", "started_at"]).reset_index(drop=True)


def test_a_run_on_shared_histories_is_the_run_alone(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    agent._warm.clear()
    calls: list[str] = []
    synth = agent.Agent._synthesise_turn

    def counted(self: agent.Agent, turn: int) -> None:
        calls.append(self.session_id)
        synth(self, turn)
    monkeypatch.setattr(agent.Agent, "_synthesise_turn", counted)
    seed = load_scenario(TEAM, [*WARM, "sessions=3"])[0].seed
    warm = [i for i in range(4) if warm_start_turn(seed, i, 12)]
    assert warm and warm[0] < 3
    alone = _rows(tmp_path, "sessions=3")
    assert len(agent._warm) == len([i for i in warm if i < 3])
    _rows(tmp_path, "sessions=4")                # synthesises only s0003's history
    _rows(tmp_path, "sessions=3", "seed=8")      # another seed: other histories
    calls.clear()
    shared = _rows(tmp_path, "sessions=3")
    assert calls == []                           # every history came from the cache
    pd.testing.assert_frame_equal(shared, alone)
