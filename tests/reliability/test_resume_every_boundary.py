"""Nothing lost on resume (issue 38 item 4): a run killed at any write boundary of a turn
— before its history line, between the history line and the turn row, after the turn
row — resumes to every row the uninterrupted run wrote, each once.

One killed in 11 SIGKILL-then-resume trials used to end `completed` with 1,599 of 1,600
rows: the kill fell after a turn's history line and before its turn row, and resume
took the turn as done. The history line now carries the turn row, and resume writes
the row back when the journal lacks it.

The kill is made exact instead of timed: the finished run's two journals are merged
into the order they were written (a success's history line, then its turn row; a
failure's row alone) and cut after each write, as SIGKILL would leave them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.conftest import run_scenario, small_scenario

Key = tuple[str, int, str, int]
SCENARIO = small_scenario(turns=5, compaction={"kind": "summarize", "threshold_tokens": 1200,
                                              "summary_max_tokens": 60, "keep_messages": 2})


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _key(r: dict[str, Any]) -> Key:
    return (r["session_id"], r["turn_index"], r["request_kind"], r["attempt"])


def write_order(run_dir: Path) -> list[tuple[str, str]]:
    """The journals' lines in the order they were written: ("history"|"turns", line)."""
    turns = (run_dir / "turns.jsonl").read_text().splitlines(keepends=True)
    hist = [h for h in (run_dir / "history.jsonl").read_text().splitlines(keepends=True)
            if "failed" not in json.loads(h)]
    order: list[tuple[str, str]] = []
    for line in turns:
        r = json.loads(line)
        if r["ok"] and r["request_kind"] in ("turn", "summary"):
            order.append(("history", hist.pop(0)))
        order.append(("turns", line))
    assert not hist
    return order


def kill_after(run_dir: Path, order: list[tuple[str, str]], writes: int) -> None:
    """The directory as a SIGKILL after `writes` journal writes leaves it."""
    for name in ("turns", "history"):
        (run_dir / f"{name}.jsonl").write_text(
            "".join(line for j, line in order[:writes] if j == name))
    m = json.loads((run_dir / "manifest.json").read_text())
    m["status"] = "running"
    (run_dir / "manifest.json").write_text(json.dumps(m))
    for name in ("turns.parquet", "summary.json", "server_metrics.parquet"):
        (run_dir / name).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("boundaries")
    path = tmp / "s.yaml"
    import yaml
    path.write_text(yaml.safe_dump(SCENARIO))
    res = run_scenario(path, tmp / "full")
    assert res.status == "completed"
    return res.run_dir


def test_the_scenario_crosses_every_kind_of_boundary(full_run: Path) -> None:
    kinds = {r["request_kind"] for r in _rows(full_run / "turns.jsonl")}
    assert kinds == {"turn", "summary"}          # a summary request is a turn's too


@pytest.mark.slow
def test_a_run_killed_at_any_write_resumes_to_every_row(full_run: Path,
                                                        tmp_path: Path) -> None:
    order = write_order(full_run)
    want = [_key(r) for r in _rows(full_run / "turns.jsonl")]
    lost = []
    for writes in range(len(order) + 1):
        run_dir = tmp_path / f"cut{writes}"
        shutil.copytree(full_run, run_dir)
        kill_after(run_dir, order, writes)
        res = execute(RunSpec("", out_dir=tmp_path, show_progress=False, resume_dir=run_dir),
                      echo=lambda s: None)
        assert res.status == "completed", (writes, res.status)
        got = [_key(r) for r in _rows(run_dir / "turns.jsonl")]
        assert len(got) == len(set(got)), (writes, "a row written twice")
        missing = sorted(set(want) - set(got))
        if missing:
            lost.append((writes, order[writes - 1][0], missing))
        shutil.rmtree(run_dir)
    assert not lost, f"rows lost after a kill at write (n, after which journal, rows): {lost}"


def test_a_worker_killed_between_the_two_lines_keeps_its_row(full_run: Path,
                                                             tmp_path: Path) -> None:
    """`--resume` of a `--workers` run whose parent died before merging: the worker's
    journals are merged, and the row its last history line carries is written back."""
    order = write_order(full_run)
    writes = next(i for i in range(len(order), 0, -1) if order[i - 1][0] == "history")
    run_dir = tmp_path / "run"
    shutil.copytree(full_run, run_dir)
    kill_after(run_dir, order, writes)
    worker = run_dir / "workers" / "w0"
    worker.mkdir(parents=True)
    for name in ("turns.jsonl", "history.jsonl"):
        (run_dir / name).rename(worker / name)
        (run_dir / name).write_text("")
    res = execute(RunSpec("", out_dir=tmp_path, show_progress=False, resume_dir=run_dir),
                  echo=lambda s: None)
    assert res.status == "completed"
    got = [_key(r) for r in _rows(run_dir / "turns.jsonl")]
    assert sorted(got) == sorted(_key(r) for r in _rows(full_run / "turns.jsonl"))
    assert all("row" not in h for h in _rows(run_dir / "history.jsonl")[:writes // 2])
