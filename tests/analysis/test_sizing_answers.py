"""A sizing answer states itself (issue 27): the `size` summary and sizing_report.html
name what was sized (hardware, model, quantisation, scenario) and the SLOs, and the
report leads with the answer, its binding constraint, the range over seeds and the
cards for the team, lists the repeat-seed probes and prints yes/no, not True/False."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from simulator.analysis.target import describe_target
from simulator.cli import main
from simulator.records.manifest import parse_manifest


def test_size_and_its_report_lead_with_the_answer_and_name_the_target(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, [
        "size", "scenarios/claude-code-team.yaml", "--twin", "h100/llama-3.1-70b:awq",
        "--turns", "8", "--max-sessions", "2", "--slo", "per_session_tok_s>=1",
        "--repeats", "1", "--team", "5", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    answer = next(i for i, line in enumerate(lines) if "session(s) meet" in line)
    assert "another seed" in lines[answer]
    assert lines[answer + 1].startswith("sized: hardware h100") and "llama-3.1-70b" in lines[answer + 1]
    assert "quantization awq" in lines[answer + 1] and "scenario claude-code-team" in lines[answer + 1]
    (folder,) = tmp_path.glob("size-*")
    data = json.loads((folder / "size.json").read_text())
    assert data["repeats_reseeded"] is True and "h100" in data["target"]
    rep = CliRunner().invoke(main, ["report", str(folder)])
    assert rep.exit_code == 0, rep.output
    page = (folder / "sizing_report.html").read_text()
    first = page.index("<table>")
    for fact in ("answer", "2 session(s) per card meet per_session_tok_s&gt;=1",
                 "binding constraint", "range over seeds", "a team of 5 sessions needs 3 card(s)",
                 "what was sized", "hardware h100"):
        assert fact in page[first:page.index("</table>", first)], fact
    assert "seed" in page and "<td>+1</td>" in page      # the repeat's probes are listed
    assert "<td>True</td>" not in page and "<td>False</td>" not in page
    assert "<td>yes</td>" in page


def test_describe_target_names_a_real_endpoint_and_the_http_twin() -> None:
    real = describe_target(parse_manifest({"endpoint": {"url": "http://gpu:8000"},
                                           "scenario": "s", "scenario_resolved": {"model": "m"}},
                                          "m"))
    assert "real endpoint http://gpu:8000, model m" in real and "scenario s" in real
    http = describe_target(parse_manifest({
        "endpoint": {"url": "http://127.0.0.1:1"}, "scenario": "s",
        "http_twin": {"hardware": "a40", "model": "q"}, "time_scale": 20.0}, "m"))
    assert "SIMULATED (HTTP twin" in http and "time scale 20.0" in http and "hardware a40" in http


def test_describe_target_says_when_the_twin_borrows_its_terms() -> None:
    """Issue 56: an answer made on borrowed terms carries 'ESTIMATE: …' (the label's
    first clause); a twin on its own fit says nothing more."""
    from simulator.twin.model.perf_model import build_perf_model

    def target(card: str) -> str:
        profile = build_perf_model(card, "qwen3-coder-30b-a3b-awq").describe()
        return describe_target(parse_manifest({
            "endpoint": {"kind": "twin-inprocess", "hardware": card, "profile": profile},
            "scenario": "s"}, "m"))
    assert "ESTIMATE: terms borrowed from the a40 fit;" in target("l40s")
    assert "ESTIMATE" not in target("a40")
