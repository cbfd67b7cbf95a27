"""A resumed team replay keeps its original clock (issue 57 item 1).

A killed (SIGKILL or Ctrl-C) team replay resumed with `run --resume` used to take every
session's start again at the resume, and to wait each replayed call's recorded gap
before skipping it: every later request of the day went out minutes late, the span grew
by a third, and the run still ended `completed`. Now a resumed stream keeps its clock:
a call already answered is replayed without waiting, and what is due goes at once.

The kill is made exact: the finished run's journals kept as a kill at simulated time
`cut` leaves them (the rows of the requests answered by then, their history lines), at
three cut points; the resumed run's arrivals (`started_mono_s` of each request's first
attempt) equal the uninterrupted run's within 1 s (simulated). A request in flight at
the kill is sent again on resume when it is due: at the resume point (the last answer
kept) if its send came before, so it is compared to that instead."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.otel_export import team_day, write_json_logs

Key = tuple[str, int, str]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _arrivals(rows: list[dict[str, Any]]) -> dict[Key, float]:
    """(session, turn, kind) → when its first attempt was sent (simulated s)."""
    out: dict[Key, float] = {}
    for r in rows:
        if r["attempt"] == 1:
            out[(r["session_id"], r["turn_index"], r["request_kind"])] = r["started_mono_s"]
    return out


def _kill_at(run_dir: Path, cut_s: float) -> tuple[set[Key], float]:
    """The run folder as a kill at simulated `cut_s` leaves it; (the requests in flight,
    where the resumed timeline starts: the last answer kept)."""
    rows = _rows(run_dir / "turns.jsonl")
    kept = [r for r in rows if r["started_mono_s"] + r["e2e_s"] <= cut_s]
    done = {(r["session_id"], r["turn_index"], r["request_kind"]) for r in kept if r["ok"]}
    flying = {(r["session_id"], r["turn_index"], r["request_kind"]) for r in rows
              if r["started_mono_s"] <= cut_s < r["started_mono_s"] + r["e2e_s"]}
    hist = [h for h in _rows(run_dir / "history.jsonl")
            if (h.get("session"), h.get("turn"), h.get("kind")) in done]
    (run_dir / "turns.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    (run_dir / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in hist))
    m = json.loads((run_dir / "manifest.json").read_text())
    m["status"] = "interrupted"
    (run_dir / "manifest.json").write_text(json.dumps(m))
    for name in ("turns.parquet", "summary.json"):
        (run_dir / name).unlink(missing_ok=True)
    return flying, max(r["started_mono_s"] + r["e2e_s"] for r in kept)


@pytest.fixture(scope="module")
def team_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("team")
    day = team_day(seed=7, sessions=6, requests=(5, 9), subagents=0.5)
    src = write_json_logs(tmp / "d.jsonl", day)
    out = tmp / "team.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    res = execute(RunSpec(str(out), [], out_dir=tmp / "runs", show_progress=False),
                  echo=lambda _: None)
    assert res.status == "completed"
    return res.run_dir, tmp


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
def test_a_resumed_team_replay_keeps_its_clock(team_run: tuple[Path, Path],
                                               share: float) -> None:
    full_dir, tmp = team_run
    full = _arrivals(_rows(full_dir / "turns.jsonl"))
    span = max(full.values())
    part = tmp / f"cut-{share}"
    shutil.copytree(full_dir, part)
    cut_s = share * span
    flying, resume_at = _kill_at(part, cut_s)
    before = {k for k, t in full.items() if t <= cut_s}
    assert 0 < len(before) < len(full)            # the cut falls inside the day
    res = execute(RunSpec("", out_dir=tmp, show_progress=False, resume_dir=part),
                  echo=lambda _: None)
    assert res.status == "completed"
    resumed = _arrivals(_rows(part / "turns.jsonl"))
    assert resumed.keys() == full.keys()
    late = {k: round(resumed[k] - full[k], 3) for k in full
            if k not in flying and abs(resumed[k] - full[k]) > 1.0}
    assert not late, f"cut at {cut_s:.0f} s: {len(late)} of {len(full)} arrivals moved: " \
                     f"{sorted(late.items())[:5]}"
    for k in flying:        # in flight at the kill: sent again when due, at once if it was
        assert abs(resumed[k] - max(full[k], resume_at)) <= 1.0, (k, resumed[k], resume_at)
