"""`endurance run --workers N`: sharding, refusal of the in-process twin, one merged run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simulator.errors import InputError
from simulator.run.execute import execute
from simulator.run.shards import (
    ProcessExecutor,
    Sharded,
    ShardJob,
    ShardResult,
    execute_sharded,
    merge_outcomes,
    shard_limits,
    shard_resume,
    shard_scenario,
    split_sessions,
)
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from tests.reliability_twin import TwinThread


def _scenario(path: Path, **over: Any) -> Path:
    data: dict[str, Any] = {
        "name": "shards", "sessions": 5, "turns": 3, "seed": 5,
        "system": {"tokens": 120}, "tools": {"count": 2, "tokens": 150},
        "first_prompt_tokens": 30, "user_prompt_tokens": 12, "think_time_s": 0.0,
        "turn_templates": [
            {"name": "read", "weight": 2, "output_tokens": 10,
             "tool": {"kind": "read", "result_tokens": 40, "latency_s": 0.0}},
            {"name": "answer", "weight": 1, "output_tokens": 8},
        ],
        "endpoint": {"timeout_s": 20.0, "connect_timeout_s": 5.0},
    }
    data.update(over)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
def test_a_worker_that_raises_reports_why(tmp_path: Path) -> None:
    """An exception inside a worker process comes back as that shard's failure."""
    spec = RunSpec(str(tmp_path / "missing.yaml"), endpoint_url="http://127.0.0.1:9",
                   out_dir=tmp_path, show_progress=False)
    job = ShardJob(0, 0, 1, spec, "r", tmp_path / "w0", False)
    (res,) = ProcessExecutor().run_shards([job])
    assert res.status == "failed" and res.index == 0
    assert "worker 0 crashed" in res.reason and "missing.yaml" in res.reason


@pytest.mark.parametrize(("sessions", "workers"), [(5, 2), (3, 8), (1, 1), (128, 3)])
def test_split_covers_every_session_once(sessions: int, workers: int) -> None:
    ranges = split_sessions(sessions, workers)
    assert len(ranges) == min(sessions, workers)
    assert [i for r in ranges for i in r] == list(range(sessions))
    assert max(map(len, ranges)) - min(map(len, ranges)) <= 1


def test_limits_are_split_over_workers(tmp_path: Path) -> None:
    path = _scenario(tmp_path / "s.yaml", limits={"max_in_flight": 5, "requests_per_s": 3.0})
    s, _ = load_scenario(str(path), [])
    assert shard_limits(s, 2) == ("limits.max_in_flight=3", "limits.requests_per_s=1.5")
    s, _ = load_scenario(str(_scenario(tmp_path / "t.yaml")), [])
    assert shard_limits(s, 2) == ()


def test_outcomes_merge_worst_first() -> None:
    ok = ShardResult(0, "completed", wall_window_s=2.0)
    stopped = ShardResult(1, "interrupted", "stopped by signal", ("s0003",), True, 3.0)
    out = merge_outcomes([ok, stopped])
    assert (out.status, out.reason, out.failed_sessions, out.deadline_reached,
            out.wall_window_s) == ("interrupted", "worker 1: stopped by signal", ["s0003"],
                                   True, 3.0)
    assert merge_outcomes([ok, ShardResult(2, "failed", "boom"), stopped]).status == "failed"
    assert merge_outcomes([ok]).status == "completed"


def test_in_process_twin_is_refused(tmp_path: Path) -> None:
    spec = RunSpec(str(_scenario(tmp_path / "s.yaml")), out_dir=tmp_path / "out",
                   show_progress=False)
    with pytest.raises(InputError, match="in-process twin is one simulated card"):
        execute_sharded(spec, 2, echo=lambda _line: None)
    with pytest.raises(InputError, match="in-process twin is one simulated card"):
        execute(spec, echo=lambda _line: None, drive=Sharded(2))
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_two_workers_write_one_run(tmp_path: Path) -> None:
    path = _scenario(tmp_path / "s.yaml")
    with TwinThread(time_scale=1000.0) as twin:
        spec = RunSpec(str(path), endpoint_url=twin.url, out_dir=tmp_path / "out",
                       show_progress=False)
        res = execute_sharded(spec, 2, echo=lambda _line: None)
    assert res.status == "completed", res.outcome.reason
    run_dirs = list((tmp_path / "out").iterdir())
    assert run_dirs == [res.run_dir]
    df = pd.read_parquet(res.run_dir / "turns.parquet")
    keys = list(zip(df.session_id, df.turn_index, df.request_kind, df.attempt, strict=True))
    assert len(keys) == len(set(keys)) == 5 * 3
    assert sorted(set(df.session_id)) == [f"s{i:04d}" for i in range(5)]
    assert df.ok.all() and (df.output_tokens > 0).all()
    for shard in ("w0", "w1"):
        assert (res.run_dir / "workers" / shard / "turns.jsonl").exists()
    summary = json.loads((res.run_dir / "summary.json").read_text())
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    assert summary["status"] == "completed" and manifest["workers"] == 2
    assert manifest["status"] == "completed" and manifest["rows"] == 15
    assert df.started_mono_s.min() >= 0.0
    # the twin over HTTP stays labelled simulated, with its time scale (issue 23)
    assert manifest["simulated"] is True and manifest["time_scale"] == 1000.0
    assert summary["simulated"] is True and summary["time_scale"] == 1000.0


def test_the_one_process_run_never_imports_the_sharded_drive() -> None:
    """`run.shards` (and Ray) build on the one-process pipeline, never the reverse: a
    plain run loads neither."""
    import ast

    import simulator.run as run_pkg
    root = Path(run_pkg.__file__).parent
    for name in ("execute", "prepare", "drive", "finish", "spec", "manifest", "signals"):
        tree = ast.parse((root / f"{name}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {m for m in imported if m in ("simulator.run.shards", "simulator.run.ray")}, name


def test_a_shard_gets_its_scenario_share_and_its_sessions_resume_state(tmp_path: Path) -> None:
    from simulator.session.resume import ResumeState
    s, _ = load_scenario(str(_scenario(tmp_path / "s.yaml", limits={"max_in_flight": 5})), [])
    shard = shard_scenario(s, shard_limits(s, 2))
    assert shard.limits.max_in_flight == 3 and shard.sessions == s.sessions
    assert shard.model_dump(exclude={"limits"}) == s.model_dump(exclude={"limits"})
    assert shard_scenario(s, ()) is s
    state = ResumeState(replay={"s0000": {}, "s0003": {}},
                        prior_attempts={("s0000", 1, "turn"): 2, ("s0004", 0, "turn"): 1},
                        done_sessions={"s0001", "s0004"}, failed_sessions=["s0002", "s0003"],
                        mono_offset_s=12.5, rows_before=40)
    low, high = shard_resume(state, range(3)), shard_resume(state, range(3, 5))
    assert (set(low.replay), low.prior_attempts, low.done_sessions, low.failed_sessions) == (
        {"s0000"}, {("s0000", 1, "turn"): 2}, {"s0001"}, ["s0002"])
    assert (set(high.replay), high.prior_attempts, high.done_sessions,
            high.failed_sessions) == ({"s0003"}, {("s0004", 0, "turn"): 1}, {"s0004"}, ["s0003"])
    assert low.mono_offset_s == high.mono_offset_s == 12.5


def test_sharded_resume_of_an_in_process_twin_run_is_refused_before_reopening(
        tmp_path: Path) -> None:
    spec = RunSpec(str(_scenario(tmp_path / "s.yaml", sessions=1, turns=1)),
                   out_dir=tmp_path / "out", show_progress=False)
    run_dir = execute(spec, echo=lambda _line: None).run_dir
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    resume = RunSpec("", resume_dir=run_dir, show_progress=False)
    with pytest.raises(InputError, match="in-process twin is one simulated card"):
        execute_sharded(resume, 2, echo=lambda _line: None)
    assert "resumes" not in json.loads((run_dir / "manifest.json").read_text())
