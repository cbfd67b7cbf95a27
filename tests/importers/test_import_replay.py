"""Import a generated multi-hundred-call transcript and replay it on the in-process twin:
per-call prompt sizes and the cache-read pattern must match the recorded ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.importers import import_claude_code, scenario_yaml
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from tests.import_transcripts import SECRETS, make_project


def _import(tmp_path: Path, calls: int) -> Path:
    proj = make_project(tmp_path / "projects", calls=calls)
    out = tmp_path / "replay.yaml"
    out.write_text(scenario_yaml(import_claude_code([proj], out_path=out).data))
    text = out.read_text()
    for secret in SECRETS:
        assert secret not in text, secret
    return out


def _agreement(path: Path, tmp_path: Path, *overrides: str) -> dict[str, float]:
    s, _ = load_scenario(path, list(overrides))
    assert s.replay is not None
    res = execute(RunSpec(str(path), list(overrides), out_dir=tmp_path / "runs",
                          show_progress=False), echo=lambda _: None)
    assert res.status == "completed"
    df = pd.read_parquet(res.run_dir / "turns.parquet")
    df = df[(df.request_kind == "turn") & df.ok]
    main = df[df.session_id == "s0000"].sort_values("turn_index")
    calls = s.replay.sessions[0].calls
    rec = np.array([c.usage.prompt_tokens for c in calls if c.usage])
    miss_rec = np.array([c.usage.prompt_tokens - c.usage.cache_read_tokens
                         for c in calls if c.usage])
    got = main.prompt_tokens.to_numpy()
    miss = got - main.cache_read_tokens.to_numpy()
    assert len(got) == len(rec)
    err = np.abs(got - rec) / rec
    comp_calls = [i for i, c in enumerate(calls) if c.compaction is not None]
    big = set(np.where(miss > 1500)[0][1:])          # call 0 is a cold cache on the twin
    return {"max_err": float(err.max()), "median_err": float(np.median(err)),
            "hit_rec": float(1 - miss_rec.sum() / rec.sum()),
            "hit": float(1 - miss.sum() / got.sum()),
            "compactions_missed": float(all(i in big for i in comp_calls)),
            "miss_disagreements": float(len(big ^ set(np.where(miss_rec > 1500)[0][1:]))),
            "sub_rows": float((df.session_id == "s0001").sum())}


@pytest.mark.slow
def test_replay_reproduces_prompts_and_cache_pattern(tmp_path: Path) -> None:
    path = _import(tmp_path, calls=120)
    a = _agreement(path, tmp_path)
    assert a["max_err"] < 0.03 and a["median_err"] < 0.015, a
    assert a["hit"] > 0.9 and abs(a["hit"] - a["hit_rec"]) < 0.03, a
    assert a["compactions_missed"] == 1.0 and a["miss_disagreements"] <= 2, a
    assert a["sub_rows"] == 11


def test_policy_and_live_modes_run(tmp_path: Path) -> None:
    path = _import(tmp_path, calls=60)
    res = execute(RunSpec(str(path), ["replay.compaction=policy", "replay.mode=live",
                                      "compaction.kind=block",
                                      "compaction.high_water_tokens=40000",
                                      "compaction.low_water_tokens=25000"],
                          out_dir=tmp_path / "runs", show_progress=False), echo=lambda _: None)
    df = pd.read_parquet(res.run_dir / "turns.parquet")
    assert res.status == "completed" and df.ok.all()
    assert (df.compaction == "block").any() and not (df.compaction == "recorded").any()


@pytest.mark.slow
def test_replay_300_calls(tmp_path: Path) -> None:
    a = _agreement(_import(tmp_path, calls=300), tmp_path)
    assert a["max_err"] < 0.03 and abs(a["hit"] - a["hit_rec"]) < 0.03, a
    assert a["compactions_missed"] == 1.0, a
