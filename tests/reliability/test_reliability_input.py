"""Bad input through the CLI: one line naming what and where, exit 2, no traceback, and
no results directory. Secrets never reach results, logs or reports; the twin binds
127.0.0.1 by default."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from simulator.cli import main
from simulator.cli.twin_serve import serve_command
from simulator.twin.serve.server import serving
from tests.conftest import small_scenario
from tests.reliability_twin import TwinThread, soak_scenario, write_yaml


def _one_line_error(r, code: int = 2) -> str:  # type: ignore[no-untyped-def]
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def _bad(**over: object) -> str:
    return yaml.safe_dump(small_scenario(**over))


@pytest.mark.parametrize(("text", "needles"), [
    ("name: x\nturns: [1, 2\n", ["s.yaml:", "malformed YAML"]),
    (_bad(turnz=3), ["s.yaml:", "turnz"]),
    (_bad(turns="many"), ["s.yaml:", "turns"]),
    (_bad(sessions=-2), ["s.yaml:", "sessions"]),
    (_bad(compaction={"kind": "block", "high_water_tokens": 1000, "low_water_tokens": 2000}),
     ["s.yaml:", "compaction", "low_water_tokens"]),
    (_bad(first_prompt_tokens={"dist": "uniform", "low": -5, "high": 10}),
     ["s.yaml:", "first_prompt_tokens"]),
    (_bad(system={"file": "missing/system.md"}), ["s.yaml:", "system.file", "missing/system.md"]),
])
def test_bad_scenarios(tmp_path: Path, text: str, needles: list[str]) -> None:
    (tmp_path / "s.yaml").write_text(text)
    for cmd in (["validate"], ["run", "--out", str(tmp_path / "r")]):
        line = _one_line_error(CliRunner().invoke(main, [*cmd, str(tmp_path / "s.yaml")]))
        assert all(n in line for n in needles), line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--twin", "z9000/qwen3-coder-30b-a3b-awq"], "z9000"),
    (["--set", "turns=-1"], "turns"),
    (["--endpoint", "ftp://host/x"], "--endpoint"),
    (["--resume", "nowhere"], "give a SCENARIO"),
])
def test_bad_command_lines(tmp_path: Path, args: list[str], needle: str) -> None:
    path = write_yaml(tmp_path / "s.yaml", small_scenario(turns=2))
    line = _one_line_error(CliRunner().invoke(main, ["run", str(path), "--out",
                                                     str(tmp_path / "r"), *args]))
    assert needle in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("manifest.json", "{not json", "manifest.json:1: corrupted JSON"),
    ("turns.parquet", "PAR1 garbage", "turns.parquet: corrupted parquet"),
])
def test_corrupted_results_dir_given_to_report(tmp_path: Path, name: str, content: str,
                                               needle: str) -> None:
    path = write_yaml(tmp_path / "s.yaml", small_scenario(turns=3))
    r = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "r"), "--quiet"])
    run_dir = Path(r.output.strip().splitlines()[-1])
    (run_dir / name).write_text(content)
    assert needle in _one_line_error(CliRunner().invoke(main, ["report", str(run_dir)]))
    assert "resume" not in _one_line_error(CliRunner().invoke(main, ["report", str(tmp_path)]))


@pytest.mark.slow
def test_api_key_never_reaches_results_logs_or_reports(tmp_path: Path) -> None:
    secret = "sk-ant-PLANTED-0123456789abcdef"
    path = write_yaml(tmp_path / "s.yaml", soak_scenario(
        sessions=2, turns=6, endpoint={"api_key_env": "MY_KEY_VAR", "timeout_s": 10.0}))
    runner = CliRunner(env={"MY_KEY_VAR": secret})
    with TwinThread(faults="500:0.2") as twin:
        r = runner.invoke(main, ["run", str(path), "--endpoint", twin.url,
                                 "--out", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    rep = runner.invoke(main, ["report", str(run_dir)])
    assert rep.exit_code == 0, rep.output
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(files) >= 6
    for text in (r.output, rep.output, *(p.read_bytes().decode("latin-1") for p in files)):
        assert secret not in text
        assert "PLANTED" not in text


def test_twin_binds_loopback_by_default() -> None:
    host = next(p for p in serve_command.params if p.name == "host")
    assert host.default == "127.0.0.1"
    assert inspect.signature(serving).parameters["host"].default == "127.0.0.1"
