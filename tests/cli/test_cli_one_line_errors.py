"""The misleading errors of issue 16 (item 6): each is one line naming the bad value and
the fix, with the right exit code, and no results directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.run.spec import base_endpoint_url
from tests.conftest import SCENARIOS
from tests.http_twin import refused_port

ENDURANCE = str(SCENARIOS / "claude-code-endurance.yaml")


def _one_line(args: list[str], code: int) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output and "Usage:" not in r.output
    lines = [ln for ln in r.output.strip().splitlines() if not ln.startswith("note: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


@pytest.mark.parametrize(("extra", "needles"), [
    (["--set", "compaction.knd=prune"], ["--set compaction.knd", "unknown key",
                                         "did you mean compaction.kind"]),
    (["--sessions", "0"], ["--sessions", "0", "at least 1"]),
    (["--sessions", "abc"], ["--sessions", "'abc'", "not a valid integer", "--help"]),
    (["--turns", "-1"], ["--turns", "-1", "at least 1"]),
])
def test_bad_flags_are_one_line(tmp_path: Path, extra: list[str], needles: list[str]) -> None:
    line = _one_line(["run", ENDURANCE, "--out", str(tmp_path / "r"), *extra], 2)
    for n in needles:
        assert n in line, line
    assert not (tmp_path / "r").exists()


def test_endpoint_naming_the_api_path_is_stripped_before_anything_is_created(
        tmp_path: Path) -> None:
    with refused_port() as port:
        url = f"http://127.0.0.1:{port}/v1/messages"
        r = CliRunner().invoke(main, ["run", ENDURANCE, "--out", str(tmp_path / "r"),
                                      "--endpoint", url])
    assert r.exit_code == 1, r.output
    assert "using the base URL" in r.output and "/v1/messages/v1/messages" not in r.output
    assert "unreachable" in r.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("url", "base"), [
    ("http://h:8000/v1/messages", "http://h:8000"), ("http://h:8000/v1/messages/", "http://h:8000"),
    ("http://h:8000/v1", "http://h:8000"), ("https://h/proxy/v1/messages", "https://h/proxy"),
    ("http://h:8000", "http://h:8000"), ("http://h:8000/proxy", "http://h:8000/proxy"),
])
def test_base_endpoint_url(url: str, base: str) -> None:
    assert base_endpoint_url(url)[0] == base


def test_check_on_an_unreachable_url_is_one_line() -> None:
    with refused_port() as port:
        line = _one_line(["check", f"http://127.0.0.1:{port}"], 1)
    assert "cannot reach" in line and "is the server running" in line
