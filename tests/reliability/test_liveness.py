"""Workers cannot be orphaned; `--resume` refuses a run whose writer or workers live, and
merges the journals of workers whose parent died before merging them (issue 15 item 2)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from simulator.endpoints.fake import FakeEndpoint
from simulator.errors import InputError
from simulator.records.ownership import (
    OWNER_FILE,
    is_alive,
    live_owner,
    refuse_if_running,
    start_time,
    write_owner,
)
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.conftest import run_scenario, small_scenario, turns_of
from tests.reliability.test_reliability_resume import cut

ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int, timeout_s: float = 15.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not is_alive(pid, None):
            return True
        time.sleep(0.05)
    return False


def test_pid_and_start_time_name_one_process(tmp_path: Path) -> None:
    me = os.getpid()
    assert start_time(me) is not None and is_alive(me, start_time(me))
    assert not is_alive(me, (start_time(me) or 0) + 1)      # a reused PID is another process
    write_owner(tmp_path)
    assert live_owner(tmp_path) is None                       # ourselves: not "another writer"
    (tmp_path / OWNER_FILE).write_text("{not json")
    assert live_owner(tmp_path) is None


def test_resume_refuses_while_a_worker_lives(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        shard = tmp_path / "workers" / "w1"
        shard.mkdir(parents=True)
        (shard / OWNER_FILE).write_text(json.dumps({"pid": child.pid,
                                                    "start_time": start_time(child.pid)}))
        with pytest.raises(InputError, match=f"worker w1 is still running \\(pid {child.pid}\\)"):
            refuse_if_running(tmp_path)
    finally:
        child.kill()
        child.wait()
    refuse_if_running(tmp_path)                               # dead now: accepted


def test_a_worker_dies_with_its_sigkilled_parent(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'from simulator.records.ownership import "
            "die_with_parent; die_with_parent(); print(1, flush=True); import time; time.sleep(60)'],"
            " stdout=subprocess.PIPE)\n"
            "c.stdout.readline(); print(c.pid, flush=True); time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert is_alive(worker, None)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _gone(worker)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_resume_merges_the_journals_of_an_orphaned_workers_run(write_scenario,  # type: ignore[no-untyped-def]
                                                               tmp_path: Path) -> None:
    """The parent was SIGKILLed before merging: the run's journal holds part of the rows,
    the rest are only in workers/w*/. Resume merges them first, then sends only the rest."""
    path = write_scenario(small_scenario(sessions=2, turns=8))
    full = turns_of(run_scenario(path, tmp_path / "a", endpoint=FakeEndpoint()))
    part = run_scenario(path, tmp_path / "b", endpoint=FakeEndpoint())
    shard = part.run_dir / "workers" / "w0"
    shard.mkdir(parents=True)
    for name in ("turns.jsonl", "history.jsonl"):
        shutil.copy(part.run_dir / name, shard / name)
    lines = (shard / "turns.jsonl").read_text().splitlines(keepends=True)
    (shard / "turns.jsonl").write_text("".join(lines[: len(lines) * 3 // 4]))
    hist = (shard / "history.jsonl").read_text().splitlines(keepends=True)
    (shard / "history.jsonl").write_text("".join(hist[: len(hist) * 3 // 4]))
    cut(part.run_dir, len(full) // 4)                         # the parent merged a quarter
    ep = FakeEndpoint()
    res = execute(RunSpec("", out_dir=tmp_path / "b", show_progress=False,
                          resume_dir=part.run_dir), echo=lambda s: None, endpoint=ep)
    assert res.status == "completed"
    merged = turns_of(res)
    assert len(merged) == len(full)
    assert not merged.duplicated(["session_id", "turn_index", "request_kind", "attempt"]).any()
    assert len(ep.requests) <= len(full) - len(full) * 3 // 4 + 2
    m = json.loads((part.run_dir / "manifest.json").read_text())
    assert m["resumes"][-1]["worker_rows_merged"] > 0
    assert not (part.run_dir / OWNER_FILE).exists()           # cleared when finished


def test_a_corrupted_journal_refuses_resume_and_leaves_the_manifest(write_scenario,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path) -> None:
    part = run_scenario(write_scenario(small_scenario(turns=6)), tmp_path, endpoint=FakeEndpoint())
    cut(part.run_dir, 3)
    lines = (part.run_dir / "turns.jsonl").read_text().splitlines(keepends=True)
    lines[1] = "garbage }{\n"
    (part.run_dir / "turns.jsonl").write_text("".join(lines))
    before = (part.run_dir / "manifest.json").read_bytes()
    with pytest.raises(InputError, match=r"turns.jsonl:2: corrupted journal line"):
        execute(RunSpec("", out_dir=tmp_path, show_progress=False, resume_dir=part.run_dir),
                echo=lambda s: None, endpoint=FakeEndpoint())
    assert (part.run_dir / "manifest.json").read_bytes() == before


@pytest.mark.slow
def test_sigkilled_workers_parent_orphans_nothing_and_resume_completes(tmp_path: Path) -> None:
    """`--workers 2`, parent SIGKILLed: both workers stop by themselves; while one lives,
    resume is refused; then resume merges their journals and finishes the run."""
    from click.testing import CliRunner

    from simulator.cli import main
    from tests.reliability_twin import TwinThread, endurance, soak_scenario, write_yaml
    # long enough that neither worker ends before the other has started on a loaded
    # machine (CI: with 120 turns a late second worker found the first one finished,
    # its owner file gone)
    turns = 600
    path = write_yaml(tmp_path / "s.yaml", soak_scenario(sessions=4, turns=turns))
    with TwinThread() as twin:
        proc = endurance("run", str(path), "--quiet", "--endpoint", twin.url, "--workers", "2",
                         "--stop-grace-s", "1", "--out", str(tmp_path / "r"))
        try:
            end = time.monotonic() + 60
            shards: list[Path] = []
            while time.monotonic() < end:
                shards = sorted((tmp_path / "r").glob("*/workers/w*/turns.jsonl"))
                if len(shards) == 2 and all(s.read_text().count("\n") >= 5
                                            and (s.parent / OWNER_FILE).exists()
                                            for s in shards):
                    break
                time.sleep(0.05)
            assert len(shards) == 2, proc.communicate()
            pids = [json.loads((s.parent / OWNER_FILE).read_text())["pid"] for s in shards]
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            assert all(_gone(pid, 30) for pid in pids)        # no orphan keeps running
        finally:
            proc.kill()
            proc.communicate()
        run_dir = shards[0].parents[2]
        r = CliRunner().invoke(main, ["run", "--resume", str(run_dir), "--quiet"])
        assert r.exit_code == 0, r.output
    df = turns_of_dir(run_dir)
    ok = df[df.ok]
    assert len(ok[ok.request_kind == "turn"]) == 4 * turns
    assert not df.duplicated(["session_id", "turn_index", "request_kind", "attempt"]).any()
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "completed" and m["resumes"][0]["worker_rows_merged"] > 0


def turns_of_dir(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "turns.parquet")
