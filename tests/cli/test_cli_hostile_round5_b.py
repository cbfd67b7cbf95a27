"""Issue 57 item 4 (hostile round five): huge numbers and deep nesting in what a run
folder holds. Python's JSON decoder raises a plain `ValueError` for a 5,000-digit integer
and `RecursionError` for 100,000-deep nesting (neither a `JSONDecodeError`); every file of
a run folder is read through `util/bounded.json_file`, so `report`, `compare` and `run
--resume` end in one line naming the file, and so does `--set KEY=<5000 digits>`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.conftest import small_scenario
from tests.reliability_twin import write_yaml

DIGITS = "9" * 5000
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(scenario file, one finished 2-turn twin run)."""
    tmp = tmp_path_factory.mktemp("r5b")
    scen = write_yaml(tmp / "s.yaml", small_scenario(turns=2))
    res = execute(RunSpec(str(scen), out_dir=tmp / "runs", show_progress=False),
                  echo=lambda s: None)
    assert res.status == "completed"
    return scen, res.run_dir


def _one_line(args: list[str], *needles: str, code: int = 2) -> str:
    r = CliRunner().invoke(main, args)
    lines = r.output.strip().splitlines()
    assert "Traceback" not in r.output
    assert r.exit_code == code and len(lines) == 1 and lines[0].startswith("error: "), \
        (args[:3], r.output[-2000:])
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert len(lines[0]) < 400, lines[0]
    return lines[0]


def _poison(path: Path, value: str) -> None:
    """`path`'s JSON object with one more member holding `value` (raw JSON text)."""
    text = path.read_text(encoding="utf-8").rstrip()
    assert text.endswith("}")
    path.write_text(text[:-1] + f', "hostile": {value}}}', encoding="utf-8")


@pytest.mark.parametrize("value", [DIGITS, DEEP], ids=["5000-digits", "100000-deep"])
@pytest.mark.parametrize("name", ["manifest.json", "summary.json"])
def test_report_and_compare_name_the_file(finished: tuple[Path, Path], tmp_path: Path,
                                          name: str, value: str) -> None:
    _, run = finished
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    _poison(bad / name, value)
    _one_line(["report", str(bad)], f"{bad / name}")
    _one_line(["compare", str(bad), str(run)], f"{bad / name}")


@pytest.mark.parametrize("value", [DIGITS, DEEP], ids=["5000-digits", "100000-deep"])
def test_resume_names_the_manifest(finished: tuple[Path, Path], tmp_path: Path,
                                   value: str) -> None:
    _, run = finished
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    m = json.loads((bad / "manifest.json").read_text())
    (bad / "manifest.json").write_text(json.dumps({**m, "status": "interrupted"}))
    _poison(bad / "manifest.json", value)
    _one_line(["run", "--resume", str(bad)], "manifest.json")


@pytest.mark.parametrize("value", [DIGITS, DEEP], ids=["5000-digits", "100000-deep"])
def test_resume_names_the_journal_line(finished: tuple[Path, Path], tmp_path: Path,
                                       value: str) -> None:
    _, run = finished
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    m = json.loads((bad / "manifest.json").read_text())
    (bad / "manifest.json").write_text(json.dumps({**m, "status": "interrupted"}))
    with (bad / "turns.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(f'{{"hostile": {value}}}\n')
    _one_line(["run", "--resume", str(bad)], "turns.jsonl:")


@pytest.mark.parametrize("value", [DIGITS, DEEP], ids=["5000-digits", "100000-deep"])
def test_report_of_a_size_folder_names_size_json(tmp_path: Path, value: str) -> None:
    for kind in ("team", "sweep"):
        folder = tmp_path / kind
        folder.mkdir()
        (folder / "size.json").write_text(f'{{"kind": "{kind}", "hostile": {value}}}')
        _one_line(["report", str(folder)], f"{folder / 'size.json'}")


@pytest.mark.parametrize("key", ["seed", "think_time_s", "twin.x"])
def test_set_with_5000_digits_names_the_key(finished: tuple[Path, Path], tmp_path: Path,
                                            key: str) -> None:
    scen, _ = finished
    line = _one_line(["run", str(scen), "--set", f"{key}={DIGITS}", "--out",
                      str(tmp_path / "o")], f"--set {key}", "4,300 digits")
    assert DIGITS[:200] not in line
    assert not (tmp_path / "o").exists()


def test_a_scenario_file_with_5000_digits_names_the_line(tmp_path: Path) -> None:
    scen = write_yaml(tmp_path / "s.yaml", small_scenario(turns=2))
    scen.write_text(scen.read_text().replace("seed: 3", f"seed: {DIGITS}"))
    _one_line(["run", str(scen), "--out", str(tmp_path / "o")], f"{scen}:", "4,300 digits")
