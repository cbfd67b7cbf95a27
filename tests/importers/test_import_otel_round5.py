"""Issue 57 item 5 (hostile round five): an OTLP protobuf file that never ends — a 1 GB
sparse file is 268 million zero length prefixes, each an empty message — is refused at
once, naming the file and the message, not read to its end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from simulator.cli import main


@pytest.mark.parametrize("fmt", ["claude-code-otel", "otel-genai"])
def test_a_sparse_gigabyte_is_refused_quickly(tmp_path: Path, fmt: str) -> None:
    p = tmp_path / "sparse.bin"
    with p.open("wb") as fh:
        fh.truncate(1 << 30)                  # 1 GB of zeros, no disk used
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["import", fmt, str(p), "-o", str(tmp_path / "o.yaml")])
    secs = time.monotonic() - t0
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert str(p) in lines[0] and "empty messages" in lines[0], lines[0]
    assert secs < 10, f"{secs:.1f} s"
    assert not (tmp_path / "o.yaml").exists()


# --- a file given to the wrong importer, and times out of range -------------------------

def _import(path: Path, fmt: str) -> list[str]:
    r = CliRunner().invoke(main, ["import", fmt, str(path), "-o", str(path.parent / "o.yaml")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert not (path.parent / "o.yaml").exists()
    return lines


@pytest.mark.parametrize("proto", [False, True])
def test_spans_given_to_claude_code_and_events_to_genai_are_named(tmp_path: Path,
                                                                  proto: bool) -> None:
    from tests.otel_export import team_day, write_genai, write_json_logs, write_proto_logs
    day = team_day(0, sessions=2)
    ext = "bin" if proto else "jsonl"
    logs = (write_proto_logs if proto else write_json_logs)(tmp_path / f"logs.{ext}", day)
    spans = write_genai(tmp_path / f"spans.{ext}", day, proto=proto)
    (line,) = _import(spans, "claude-code-otel")
    assert f"{spans}: OTLP spans (traces), not log records" in line, line
    assert f"run `endurance import otel-genai {spans}`" in line, line
    (line,) = _import(logs, "otel-genai")
    assert f"{logs}: OTLP log records (events), not spans" in line, line
    assert f"run `endurance import claude-code-otel {logs}`" in line, line


def _event(path: Path, *, ts: str | None = None, t_ns: str | None = None,
           dur_ms: int = 1500) -> Path:
    from tests.otel_export import dumps_attrs
    a: dict[str, object] = {"event.name": "api_request", "session.id": "s", "model": "m",
                            "duration_ms": dur_ms, "input_tokens": 10, "output_tokens": 100}
    if ts is not None:
        a["event.timestamp"] = ts
    rec: dict[str, object] = {"body": {"stringValue": "claude_code.api_request"},
                              "attributes": dumps_attrs(a)}
    if t_ns is not None:
        rec["timeUnixNano"] = t_ns
    path.write_text(json.dumps({"resourceLogs": [{"resource": {}, "scopeLogs": [
        {"scope": {}, "logRecords": [rec]}]}]}) + "\n")
    return path


@pytest.mark.parametrize(("kw", "needle"), [
    ({"ts": "1969-07-20T20:17:00Z"}, "'1969-07-20T20:17:00Z' is not a time we read: before 1970"),
    ({"ts": "2263-01-01T00:00:00Z"}, "past the year 2262"),
    ({"ts": "9999-12-31T23:59:59-01:00"}, "past the year 2262"),
    ({"ts": "1970-01-01T00:00:00.5Z"}, "began before 1970"),
    ({"t_ns": "1000"}, "began before 1970"),
    ({"t_ns": "-5"}, "field 'timeUnixNano': -5 ns is before 1970"),
    ({"t_ns": "9300000000000000000"}, "field 'timeUnixNano': 9300000000000000000 ns is past "
                                      "the year 2262"),
])
def test_a_time_before_1970_or_past_2262_names_the_record(tmp_path: Path,
                                                          kw: dict[str, Any],
                                                          needle: str) -> None:
    p = _event(tmp_path / "t.jsonl", **kw)
    (line,) = _import(p, "claude-code-otel")
    assert f"{p}: line 1, record 0" in line and needle in line, line
