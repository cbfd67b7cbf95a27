"""`endurance watch` on what a killed or hostile run leaves (issue 49): journals read as
the importers read them (regular files only, bounded), a cut last line not yet written,
a FIFO, a device, a journal linking to itself, a manifest that is not JSON, a finished
size folder, and a replay speed no one could wait for — one line or a bounded end."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from simulator.cli import main
from simulator.live.follow import MAX_READ, JournalTail

pytestmark = pytest.mark.timeout(60)


def _copy(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    return run


def _watch(run: Path, *extra: str) -> Result:
    """`endurance watch`, in process (each test's timeout: a hang fails the test)."""
    return CliRunner().invoke(main, ["watch", str(run), "--progress", "plain", *extra])


def _refused(r: Result, needle: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and needle in lines[0], r.output[-2000:]
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_a_fifo_journal_is_refused(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    (run / "turns.jsonl").unlink()
    os.mkfifo(run / "turns.jsonl")
    _refused(_watch(run, "--speed", "0"), "a FIFO, not a regular journal")


def test_a_device_journal_is_refused(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    (run / "turns.jsonl").unlink()
    (run / "turns.jsonl").symlink_to("/dev/zero")
    _refused(_watch(run, "--speed", "0"), "a device, not a regular journal")


def test_a_journal_linking_to_itself_is_refused(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    (run / "turns.jsonl").unlink()
    (run / "turns.jsonl").symlink_to("turns.jsonl")
    _refused(_watch(run, "--speed", "0"), "turns.jsonl: cannot read journal")


def test_a_manifest_that_is_not_json_is_said_so(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    (run / "manifest.json").write_text("not json{")
    p = _watch(run)
    _refused(p, "manifest.json: not a JSON object")
    assert "no manifest.json" not in p.stderr


def test_a_killed_runs_cut_last_line_is_not_yet_written(finished: Path,
                                                        tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    rows = (run / "turns.jsonl").read_bytes()
    (run / "turns.jsonl").write_bytes(rows[:-20])         # what SIGKILL leaves
    m = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**m, "status": "running"}))
    (run / "summary.json").unlink()
    p = _watch(run, "--speed", "0")                        # hung before: never reached
    assert p.exit_code == 0, p.stderr[-2000:]             # its scrapes' end
    n = rows.count(b"\n")
    assert f"run: requests {n - 1} " in p.stdout, p.stdout[-2000:]


def test_a_finished_size_folder_prints_and_ends(finished: Path, tmp_path: Path) -> None:
    folder = tmp_path / "size-x"
    folder.mkdir()
    shutil.copytree(finished, folder / finished.name)
    (folder / "size.json").write_text("{}")
    p = _watch(folder)
    assert p.exit_code == 0, p.stderr[-2000:]
    assert f"endurance watch {folder}: finished, 1 point(s)" in p.stdout


@pytest.mark.parametrize("speed", ["1e-300", "0.0001", "nan"])
def test_a_replay_no_one_could_wait_for_is_refused(speed: str, tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["watch", str(tmp_path), "--speed", speed])
    assert r.exit_code == 2 and "--speed" in r.output and "Traceback" not in r.output


def test_a_tail_reads_a_bounded_amount_a_call(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    with path.open("wb") as f:                             # a line longer than one read
        f.write(b"x" * (MAX_READ + 10) + b"\n" + b'{"a": 1}\n' + b'{"b": ')
    tail = JournalTail(path)
    assert tail.read() == [] and tail.offset == MAX_READ   # skipped, not held in memory
    assert tail.read_all() == [{"a": 1}]                   # the cut last line waits
    with path.open("ab") as f:
        f.write(b"2}\n")
    assert tail.read() == [{"b": 2}]


def test_a_finished_folder_with_a_fifo_summary_prints_and_ends(finished: Path,
                                                                tmp_path: Path) -> None:
    folder = tmp_path / "size-x"
    folder.mkdir()
    point = folder / finished.name
    shutil.copytree(finished, point)
    (point / "summary.json").unlink()
    os.mkfifo(point / "summary.json")
    (folder / "size.json").write_text("{}")
    p = _watch(folder)
    assert p.exit_code == 0 and "finished, 1 point(s)" in p.stdout, p.output[-2000:]
