"""Importer: hand-written fixtures in the documented format, privacy, verbatim opt-in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.errors import InputError
from simulator.importers import import_claude_code, scenario_yaml
from simulator.importers.claude_code import parse_transcripts
from simulator.scenario.load import load_scenario
from simulator.scenario.replay import parse_spans

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "claude_code" / "proj"
PLANTED = ("ghp_FIXTURESECRET123", "/home/bob", "bob-laptop", "bob@example.org", "private-repo",
           "bob")


def test_parse_merges_split_lines_and_counts_skips() -> None:
    t = parse_transcripts([FIXTURE])
    main_s, sub = t.sessions
    assert [len(c.assistant) for c in main_s.calls] == [2, 1, 2, 1]   # split lines joined
    assert main_s.calls[0].usage is not None and main_s.calls[0].usage["output_tokens"] == 42
    assert main_s.calls[2].user[0].is_error
    assert main_s.calls[3].compaction == ("manual", 19400, 1)
    assert main_s.calls[3].user[1].summary and sub.sidechain
    assert t.skipped["malformed line"] == 1 and t.malformed == ["s1.jsonl:9"]
    for kind in ("progress", "file-history-snapshot", "queue-operation", "some-future-record",
                 "assistant (synthetic)"):
        assert t.skipped[kind] == 1, kind


def test_strict_names_file_and_line() -> None:
    with pytest.raises(InputError, match=r"s1\.jsonl:9: malformed"):
        parse_transcripts([FIXTURE], strict=True)


def test_anonymised_scenario_has_no_original_text_and_keeps_repeats(tmp_path: Path) -> None:
    out = tmp_path / "fx.yaml"
    res = import_claude_code([FIXTURE], out_path=out)
    text = scenario_yaml(res.data)
    for secret in PLANTED:
        assert secret not in text, secret
    out.write_text(text)
    s, _ = load_scenario(out)
    assert s.replay is not None and not s.contains_verbatim_content
    main_s, sub = s.replay.sessions
    assert (sub.parent, sub.parent_call) == (0, 2) and main_s.calls[2].spawns == (1,)
    read = set(parse_spans(main_s.calls[1].user[0].spans or ""))
    old = next(a for a in main_s.calls[1].assistant[0].args if a.key == "old_string")
    assert set(parse_spans(old.spans or "")) <= read   # Edit's old_string repeats the Read
    assert main_s.calls[1].user[0].numbered_from == 1


def test_keep_content_is_loud(tmp_path: Path) -> None:
    out = tmp_path / "verbatim.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code", str(FIXTURE), "-o", str(out),
                                  "--keep-content"])
    assert r.exit_code == 0, r.output
    assert "VERBATIM" in r.output
    text = out.read_text()
    assert text.startswith("# WARNING") and "ghp_FIXTURESECRET123" in text
    assert load_scenario(out)[0].contains_verbatim_content


def test_cli_prints_summary_and_validates(tmp_path: Path) -> None:
    out = tmp_path / "s.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code", str(FIXTURE / "s1.jsonl"),
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert re.search(r"1 session\(s\), 0 sub-agent\(s\), 4 calls", r.output)
    assert "malformed line 1" in r.output and "(validated)" in r.output
    bad = CliRunner().invoke(main, ["import", "claude-code", str(tmp_path / "nope"), "-o",
                                    str(out)])
    assert bad.exit_code == 2 and "no such transcript" in bad.output
