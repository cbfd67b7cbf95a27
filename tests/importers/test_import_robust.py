"""Importer robustness: it never destroys its input, every bad input is one line
naming file, line and what was expected (exit 2), `--strict` fails a lossy import
(exit 1), and a replay whose requests fail ends `failed`, never a quiet success."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.importers import import_claude_code, scenario_yaml
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.import_transcripts import make_format


def _recs(n_calls: int = 2) -> list[dict[str, Any]]:
    """A tiny valid transcript: a prompt, then n text replies with usage."""
    out: list[dict[str, Any]] = []
    parent = None
    for i in range(n_calls):
        u = {"type": "user", "uuid": f"u{i}", "parentUuid": parent,
             "timestamp": f"2025-06-02T09:00:{2 * i:02d}Z",
             "message": {"role": "user", "content": f"question {i}"}}
        a = {"type": "assistant", "uuid": f"a{i}", "parentUuid": f"u{i}",
             "timestamp": f"2025-06-02T09:00:{2 * i + 1:02d}Z",
             "message": {"id": f"m{i}", "role": "assistant", "model": "claude-x",
                         "content": [{"type": "text", "text": f"answer {i}"}],
                         "usage": {"input_tokens": 5, "cache_read_input_tokens": 19000 + 20 * i,
                                   "cache_creation_input_tokens": 10, "output_tokens": 4}}}
        out += [u, a]
        parent = f"a{i}"
    return out


def _write(path: Path, recs: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    return path


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["import", "claude-code", *args])


def _one_line_error(r: Any, *needles: str) -> None:
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_output_equal_to_input_is_refused(tmp_path: Path) -> None:
    src = _write(tmp_path / "s.jsonl", _recs())
    before = src.read_bytes()
    _one_line_error(_cli(str(src), "-o", str(src)), "one of the inputs")
    _one_line_error(_cli(str(src), "-o", str(src), "--force"), "one of the inputs")
    assert src.read_bytes() == before


def test_existing_output_needs_force_and_write_is_atomic(tmp_path: Path) -> None:
    src = _write(tmp_path / "s.jsonl", _recs())
    out = tmp_path / "out.yaml"
    out.write_text("keep me\n")
    _one_line_error(_cli(str(src), "-o", str(out)), "already exists", "--force")
    assert out.read_text() == "keep me\n"
    r = _cli(str(src), "-o", str(out), "--force")
    assert r.exit_code == 0, r.output
    assert "replay:" in out.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize(("value", "shown"), [("12", '"12"'), ([1], "[1]"), (-3, "-3"),
                                              (1.5, "1.5"), (True, "true"),
                                              (10 ** 400, "1" + "0" * 39)])
def test_bad_usage_values_are_one_line(tmp_path: Path, value: Any, shown: str) -> None:
    recs = _recs()
    recs[3]["message"]["usage"]["output_tokens"] = value
    src = _write(tmp_path / "s.jsonl", recs)
    _one_line_error(_cli(str(src), "-o", str(tmp_path / "o.yaml")),
                    "s.jsonl:4", "usage.output_tokens", "non-negative integer", shown)


def test_usage_not_an_object(tmp_path: Path) -> None:
    recs = _recs()
    recs[1]["message"]["usage"] = "lots"
    _one_line_error(_cli(str(_write(tmp_path / "s.jsonl", recs)), "-o", str(tmp_path / "o.yaml")),
                    "s.jsonl:2", "message.usage", "object")


def test_unreadable_timestamp(tmp_path: Path) -> None:
    recs = _recs()
    recs[2]["timestamp"] = "yesterday at noon"
    _one_line_error(_cli(str(_write(tmp_path / "s.jsonl", recs)), "-o", str(tmp_path / "o.yaml")),
                    "s.jsonl:3", "timestamp", "ISO 8601")


def test_empty_and_foreign_files(tmp_path: Path) -> None:
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n\n")
    _one_line_error(_cli(str(empty), "-o", str(tmp_path / "o.yaml")), "e.jsonl", "empty",
                    "expected")
    foreign = _write(tmp_path / "f.jsonl", [{"event": "click", "x": 1}, {"event": "key"}])
    _one_line_error(_cli(str(foreign), "-o", str(tmp_path / "o.yaml")), "f.jsonl:1",
                    "not a Claude Code transcript", "expected")
    only_users = _write(tmp_path / "u.jsonl", _recs()[:1])
    _one_line_error(_cli(str(only_users), "-o", str(tmp_path / "o.yaml")), "u.jsonl",
                    "no assistant responses", "expected")


def test_bom_is_accepted(tmp_path: Path) -> None:
    src = _write(tmp_path / "s.jsonl", _recs())
    src.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    r = _cli(str(src), "-o", str(tmp_path / "o.yaml"))
    assert r.exit_code == 0 and "malformed" not in r.output, r.output
    assert "calls imported 2 of 2 found" in r.output


def test_bad_system_and_tools_files(tmp_path: Path) -> None:
    src = _write(tmp_path / "s.jsonl", _recs())
    sysf = tmp_path / "sys.txt"
    sysf.write_bytes(b"You are \xff\xfe helpful")
    _one_line_error(_cli(str(src), "-o", str(tmp_path / "o.yaml"), "--system-file", str(sysf)),
                    "sys.txt", "UTF-8", "byte 8")
    tools = tmp_path / "tools.yaml"
    tools.write_text("tools: [unclosed\n  - name: x\n")
    _one_line_error(_cli(str(src), "-o", str(tmp_path / "o.yaml"), "--tools-file", str(tools)),
                    "tools.yaml", "--tools-file", "expected")
    _one_line_error(_cli(str(src), "-o", str(tmp_path / "o.yaml"), "--tools-file",
                         str(tmp_path / "missing.json")), "missing.json", "existing file")
    tools.write_text("- description: no name\n")
    _one_line_error(_cli(str(src), "-o", str(tmp_path / "o.yaml"), "--tools-file", str(tools)),
                    "tools.yaml", "'name'")


def test_strict_fails_a_lossy_import(tmp_path: Path) -> None:
    recs = _recs(3)
    fork = {**recs[2], "uuid": "fork", "message": {"role": "user", "content": "edited question"}}
    recs.insert(3, fork)              # an abandoned branch: a user message nobody answered
    src = _write(tmp_path / "s.jsonl", recs)
    out = tmp_path / "o.yaml"
    lenient = _cli(str(src), "-o", str(out))
    assert lenient.exit_code == 0 and "DROPPED: user (off active chain) 1" in lenient.output
    out.unlink()
    r = _cli(str(src), "-o", str(out), "--strict")
    assert r.exit_code == 1 and "--strict" in r.output and not out.exists(), r.output


def test_replay_with_failed_requests_is_not_a_success(tmp_path: Path) -> None:
    proj = make_format(tmp_path / "p", "parallel", calls=12)
    out = tmp_path / "r.yaml"
    data = import_claude_code([proj], out_path=out).data
    assert data["limits"]["max_failed_sessions_frac"] == 0.0
    call = data["replay"]["sessions"][0]["calls"][5]
    call["compaction"] = {"trigger": "auto", "pre_tokens": None, "at": len(call["user"])}
    out.write_text(scenario_yaml(data))   # history compacted to nothing: nothing to send
    res = execute(RunSpec(str(out), ["replay.timing=none"], out_dir=tmp_path / "runs",
                          show_progress=False), echo=lambda _: None)
    assert res.status == "failed" and "no message to send" in (res.outcome.reason or "")


def test_file_that_starts_with_a_summary_keeps_it_as_context(tmp_path: Path) -> None:
    recs = _recs(3)
    recs[0]["isCompactSummary"] = True    # a session resumed from a compacted one
    data = import_claude_code([_write(tmp_path / "s.jsonl", recs)],
                              out_path=tmp_path / "o.yaml").data
    first = data["replay"]["sessions"][0]["calls"][0]
    assert first["user"] and not any(b.get("summary") for b in first["user"])
    assert "compaction" not in first
