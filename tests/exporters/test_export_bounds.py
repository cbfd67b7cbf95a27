"""`endurance export weka|mooncake` on anything but a complete, un-resumed run of this
version, on a garbled journal, and to an output it must not write (issue 38 item 2):
one line, exit 2, and the run's own files never touched."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.cli import main
from tests.conftest import refused_in_one_line, small_scenario
from tests.reliability_twin import write_yaml

FORMATS = ["weka", "mooncake"]


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("export")
    path = write_yaml(tmp / "s.yaml", small_scenario(turns=2))
    r = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp / "runs"), "--quiet",
                                  "--set", "record_blocks=true"])
    assert r.exit_code == 0, r.output
    return Path(r.output.strip().splitlines()[-1])


def _copy(base: Path, tmp: Path) -> Path:
    run = tmp / "run"
    shutil.copytree(base, run)
    return run



def _edit_manifest(**fields: Any) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        m = json.loads((run / "manifest.json").read_text())
        m.update(fields)
        (run / "manifest.json").write_text(json.dumps(m))
    return edit


def _sub(name: str, old: str, new: str) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        import re
        p = run / name
        p.write_text(re.sub(old, new, p.read_text(), count=1))
    return edit


def _append_bytes(name: str, data: bytes) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        with (run / name).open("ab") as fh:
            fh.write(data)
    return edit


BINARY = bytes(range(128, 256)) * 8

CASES: list[tuple[str, Callable[[Path], None], list[str]]] = [
    ("running", _edit_manifest(status="running"), ["status \"running\"", "killed"]),
    ("interrupted", _edit_manifest(status="interrupted"), ["status \"interrupted\""]),
    ("failed", _edit_manifest(status="failed"), ["status \"failed\""]),
    ("old-version", _edit_manifest(versions={"endurance": "0.0.1"}),
     ["written by endurance \"0.0.1\""]),
    ("resumed", _edit_manifest(resumes=[{"at": 1}]), ["resumed run"]),
    ("blocks-binary", _append_bytes("blocks.jsonl", BINARY), ["blocks.jsonl:", "UTF-8"]),
    ("turns-binary", _append_bytes("turns.jsonl", BINARY), ["turns.jsonl:", "UTF-8"]),
    ("blocks-keep-string", _sub("blocks.jsonl", r'"keep": *\d+', '"keep": "abc"'),
     ["blocks.jsonl:1", "field 'keep'"]),
    ("blocks-new-int", _sub("blocks.jsonl", r'"new": *\[[^]]*\]', '"new": 5'),
     ["blocks.jsonl:1", "field 'new'"]),
    ("turns-started-string", _sub("turns.jsonl", r'"started_mono_s": *[0-9.e-]+',
                                  '"started_mono_s": "x"'),
     ["turns.jsonl:1", "field 'started_mono_s'"]),
    ("turns-prompt-list", _sub("turns.jsonl", r'"prompt_tokens": *\d+', '"prompt_tokens": [1]'),
     ["turns.jsonl:1", "field 'prompt_tokens'"]),
    ("turns-5000-digits", _sub("turns.jsonl", r'"output_tokens": *\d+',
                               '"output_tokens": ' + "9" * 5000),
     ["turns.jsonl:1", "4300 digits"]),
    ("manifest-parent-string", lambda run: _edit_manifest(scenario_resolved={
        **json.loads((run / "manifest.json").read_text())["scenario_resolved"],
        "replay": {"sessions": [{"parent": "x"}]}})(run), ["manifest.json", "field 'parent'"]),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("edit", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_export_refuses_what_it_cannot_export_in_one_line(
        base_run: Path, tmp_path: Path, fmt: str, edit: Callable[[Path], None],
        needles: list[str]) -> None:
    run = _copy(base_run, tmp_path)
    edit(run)
    out = tmp_path / "o.trace"
    refused_in_one_line(["export", fmt, str(run), "-o", str(out)], *needles)
    assert not out.exists()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["turns.jsonl", "turns.parquet", "manifest.json", "new.json"])
def test_export_never_writes_into_the_run_it_reads(base_run: Path, tmp_path: Path, fmt: str,
                                                   name: str) -> None:
    """`export mooncake RUN -o RUN/turns.jsonl --force` truncated the journal it read."""
    run = _copy(base_run, tmp_path)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    refused_in_one_line(["export", fmt, str(run), "-o", str(run / name), "--force"],
             "inside the run directory")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_to_an_unwritable_path_is_one_line(base_run: Path, tmp_path: Path,
                                                  fmt: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    refused_in_one_line(["export", fmt, str(base_run), "-o", str(blocker / "sub" / "o.trace")],
             "cannot write")
    refused_in_one_line(["export", fmt, str(base_run), "-o", "/proc/x.trace"], "cannot write")


def test_export_mooncake_to_a_folder_says_so_even_with_force(base_run: Path,
                                                             tmp_path: Path) -> None:
    refused_in_one_line(["export", "mooncake", str(base_run), "-o", str(tmp_path), "--force"],
             "is a folder")


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_never_replaces_a_device_node(base_run: Path, tmp_path: Path, fmt: str) -> None:
    node = tmp_path / "nulldev"
    try:
        os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    refused_in_one_line(["export", fmt, str(base_run), "-o", str(node), "--force"], "not a regular file")
    assert node.exists() and not node.is_file()


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_into_a_missing_folder_is_refused_not_made(base_run: Path, tmp_path: Path,
                                                          fmt: str) -> None:
    """`-o /nonexistent/d/x.jsonl` made the folders (from / down, as root)."""
    refused_in_one_line(["export", fmt, str(base_run), "-o", str(tmp_path / "no" / "such" / "x.t")],
             "cannot write")
    assert not (tmp_path / "no").exists()
