"""Issue 57 item 7: `watch` dropped a journal row that `run --resume` refuses (a complete
line that is not a JSON object, or one past the JSON bounds: a 5,000-digit number).
Both read a row the one way (`util.bounded.json_row`) and both name it: a replay is
refused in the line resume gives; a followed run says so in a note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.live.follow import JournalTail

pytestmark = pytest.mark.timeout(120)


BAD = {"not-json": "garbage\n", "5000-digits": '{"h": ' + "9" * 5000 + "}\n"}


@pytest.mark.parametrize("bad", list(BAD))
def test_watch_and_resume_refuse_the_same_row(finished: Path, tmp_path: Path,
                                              bad: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    journal = run / "turns.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join([*lines[:2], BAD[bad], *lines[2:]]))     # line 3
    m = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**m, "status": "interrupted"}))
    where = f"{journal}:3: corrupted journal line"
    resumed = CliRunner().invoke(main, ["run", "--resume", str(run), "--quiet"])
    assert resumed.exit_code == 2 and where in resumed.output, resumed.output
    watched = CliRunner().invoke(main, ["watch", str(run), "--speed", "0"])
    errors = [x for x in watched.output.splitlines() if x.startswith("error: ")]
    assert watched.exit_code == 2 and len(errors) == 1 and where in errors[0], watched.output


def test_a_tail_names_the_row_it_cannot_read(tmp_path: Path) -> None:
    p = tmp_path / "turns.jsonl"
    p.write_text('{"a": 1}\n' + BAD["5000-digits"] + '{"a": 2}\n')
    tail = JournalTail(p)
    assert tail.read_all() == [{"a": 1}, {"a": 2}]
    assert tail.corrupt == f"{p}:2: corrupted journal line (not a JSON object)"
