"""Issue 57 item 7: a resumed journal with duplicated rows (a row appended twice by a
copy or a merge done by hand) kept them and counted those turns twice. Resume keeps
the first row of each (session, turn, kind, attempt) and says so in one line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from simulator.cli import main
from simulator.records.ownership import turn_key
from tests.conftest import run_scenario, small_scenario
from tests.reliability.test_reliability_resume import cut


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_duplicated_rows_are_kept_once_and_said_so(write_scenario,  # type: ignore[no-untyped-def]
                                                   tmp_path: Path) -> None:
    res = run_scenario(write_scenario(small_scenario(turns=4)), tmp_path / "a")
    full = len(_rows(res.run_dir / "turns.jsonl"))
    cut(res.run_dir, 4)
    journal = res.run_dir / "turns.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:4] + lines[1:3]))        # rows 2 and 3 twice
    r = CliRunner().invoke(main, ["run", "--resume", str(res.run_dir), "--quiet"])
    assert r.exit_code == 0, r.output
    said = [x for x in r.output.splitlines() if "duplicated row" in x]
    assert len(said) == 1 and f"{journal}: 2 duplicated row(s)" in said[0], r.output
    rows = _rows(journal)
    keys = [turn_key(x) for x in rows]  # type: ignore[arg-type]
    assert len(keys) == len(set(keys)) and len(rows) == full, (len(rows), full)
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert summary["requests"] == full, summary.get("requests")
