"""Resume refuses a foreign journal (issue 29 item 5): every journal row carries its
run id (history rows also the scenario hash), and `--resume` of a directory whose
journal holds another run's rows is refused in one line, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from tests.conftest import run_scenario, small_scenario
from tests.reliability.test_reliability_resume import cut


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_history_rows_carry_the_run_id_and_scenario_hash(write_scenario,  # type: ignore[no-untyped-def]
                                                         tmp_path: Path) -> None:
    res = run_scenario(write_scenario(small_scenario(turns=3)), tmp_path / "a")
    m = json.loads((res.run_dir / "manifest.json").read_text())
    hist = _rows(res.run_dir / "history.jsonl")
    assert hist and all(h["run"] == m["run_id"] for h in hist)
    assert all(h["scenario_hash"] == m["scenario_hash"] for h in hist)
    assert all(t["run_id"] == m["run_id"] for t in _rows(res.run_dir / "turns.jsonl"))


@pytest.mark.parametrize("journal", ["turns.jsonl", "history.jsonl"])
def test_resume_refuses_another_runs_rows(write_scenario, tmp_path: Path,  # type: ignore[no-untyped-def]
                                          journal: str) -> None:
    path = write_scenario(small_scenario(turns=4))
    mine = run_scenario(path, tmp_path / "a")
    other = run_scenario(write_scenario(small_scenario(turns=4, seed=9)), tmp_path / "b")
    cut(mine.run_dir, 2)
    foreign = (other.run_dir / journal).read_text().splitlines(keepends=True)[:1]
    target = mine.run_dir / journal
    text = target.read_text()
    if journal == "turns.jsonl":            # drop the torn tail `cut` left, then append
        text = text[:text.rfind("\n") + 1]
    target.write_text("".join(foreign) + text)
    before = {p.name: p.read_bytes() for p in mine.run_dir.iterdir() if p.is_file()}
    r = CliRunner().invoke(main, ["run", "--resume", str(mine.run_dir), "--quiet"])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert journal in lines[0] and "row 1" in lines[0] and "another run" in lines[0]
    after = {p.name: p.read_bytes() for p in mine.run_dir.iterdir() if p.is_file()}
    assert after == before                  # refused before anything changed
