"""Importer fidelity on synthetic transcripts in every format Claude Code has written:
parallel tool calls (branching uuid tree), in-file sidechains, sub-agent files,
compact_boundary (auto and manual), older summary-led segments, progress records in
the chain, a UTF-8 BOM. Nothing lost, every tool call paired, context per call within
10% of the recorded usage — planned by the importer and sent on the in-process twin."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulator.importers import import_claude_code, scenario_yaml
from simulator.importers.anonymize import SpanTexts
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import load_scenario
from simulator.scenario.replay import parse_spans
from simulator.session import agent as agent_mod
from simulator.session.conversation import validate_structure
from tests.import_transcripts import FORMATS, SECRETS, SUB_PREFIX, make_format

COMPACTIONS = {"compact_boundary": 2, "summary_segments": 2}
# The fast subset imports and replays two formats (one with compactions); the full suite
# all of them (each replay is seconds: the fast subset stays under a minute).
FAST = ("parallel", "compact_boundary")
EACH_FORMAT = [f if f in FAST else pytest.param(f, marks=pytest.mark.slow) for f in FORMATS]
SUBAGENTS = {"sidechain": 1, "subagent": 1}


_IMPORTED: dict[str, tuple[str, dict[str, Any]]] = {}


def _import(tmp_path: Path, fmt: str) -> tuple[Path, dict[str, Any]]:
    """The format's transcript imported into `tmp_path`. The import is deterministic (the
    same YAML and summary from any folder), so it runs once per format for the module and
    later tests get its copy."""
    out = tmp_path / f"{fmt}.yaml"
    if fmt not in _IMPORTED:
        proj = make_format(tmp_path / "projects", fmt)
        res = import_claude_code([proj], out_path=out)
        _IMPORTED[fmt] = (scenario_yaml(res.data), res.summary)
    text, summary = _IMPORTED[fmt]
    out.write_text(text)
    return out, copy.deepcopy(summary)


@pytest.mark.parametrize("fmt", EACH_FORMAT)
def test_every_format_imports_without_loss(tmp_path: Path, fmt: str) -> None:
    out, s = _import(tmp_path, fmt)
    assert s["calls"] == s["calls_found"] > 30, s
    assert s["dropped"] == {} and s["malformed_at"] == [], s
    assert s["tool_calls"] == s["tool_results_paired"] > 30 and s["tool_calls_unanswered"] == 0
    assert s["compactions_found"] == s["compactions"] == COMPACTIONS.get(fmt, 0), s
    assert (s["sessions"], s["subagents"]) == (1, SUBAGENTS.get(fmt, 0)), s
    assert s["context_error_max"] < 0.10, s
    assert s["context_error_points"] == s["calls"] - s["sessions"] - s["subagents"], s
    assert abs(s["prefix_tokens"] - 19_000) < 0.02 * 19_000, s
    if fmt in SUBAGENTS:
        assert [abs(p - SUB_PREFIX) < 0.02 * SUB_PREFIX for p in s["subagent_prefix_tokens"]] \
            == [True], s
    text = out.read_text()
    for secret in SECRETS:
        assert secret not in text, secret
    sc, _ = load_scenario(out)
    assert sc.replay is not None
    for sess in sc.replay.sessions:
        for i, call in enumerate(sess.calls):
            assert call.usage is not None and call.usage.output_tokens > 1   # never a placeholder
            uses = [b.id for b in call.assistant if b.kind == "tool_use"]
            if uses and i + 1 < len(sess.calls):    # one message with all results, in order
                nxt = sess.calls[i + 1]
                got = [b.id for b in nxt.user[: len(uses)] if b.kind == "tool_result"]
                assert got == uses, (fmt, i)


def test_summary_segments_continue_one_session(tmp_path: Path) -> None:
    out, _ = _import(tmp_path, "summary_segments")
    sc, _ = load_scenario(out)
    assert sc.replay is not None and len(sc.replay.sessions) == 1
    calls = sc.replay.sessions[0].calls
    points = [(i, c.compaction) for i, c in enumerate(calls) if c.compaction is not None]
    assert len(points) == 2
    for i, p in points:
        assert p is not None and p.pre_tokens == calls[i - 1].usage.prompt_tokens  # type: ignore[union-attr]
        assert any(b.summary for b in calls[i].user[p.at:])
        assert calls[i].wait_s > 0          # after the previous segment, not beside it


def test_content_shape_survives_anonymisation(tmp_path: Path) -> None:
    out, _ = _import(tmp_path, "parallel")
    sc, _ = load_scenario(out)
    assert sc.replay is not None
    calls = sc.replay.sessions[0].calls
    tools = {b.tool for c in calls for b in c.assistant if b.kind == "tool_use"}
    assert {"Read", "Edit", "Bash", "TaskCreate"} <= tools      # Claude Code's own names kept
    assert "mcp__github__search" not in tools and any(t and t.startswith("mcp__tool_") for t in tools)
    reads = [b for c in calls for b in c.user if b.kind == "tool_result" and b.tool == "Read"]
    tails = [b for b in reads if b.numbered_lines is not None]
    assert reads and all(b.numbered_from == 1 for b in reads) and tails
    texts = SpanTexts(sc.seed, sc.replay.span_tokens, sc.replay.span_kinds)
    body = texts.text(tails[0].spans or "", 1, 0, tails[0].numbered_lines).split("\n")
    assert body[0].startswith("     1→") and not body[-1].startswith(" ")
    seen: set[int] = set()
    repeated = total = 0
    for c in calls:     # the user blocks (results) came before the call's reply
        for b in c.user:
            if b.tool == "Read":
                seen.update(parse_spans(b.spans or ""))
        for b in c.assistant:
            old = next((a for a in b.args if a.key == "old_string"), None)
            if b.tool == "Edit" and old is not None:
                ids = parse_spans(old.spans or "")
                total += len(ids)
                repeated += sum(i in seen for i in ids)
    assert total > 0 and repeated == total      # Edit old_string copies an earlier Read


def _replay(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    bad: list[str] = []
    build = agent_mod.Agent._build

    def checked(self: Any, messages: Any, max_tokens: int, template: Any) -> Any:
        why = validate_structure(messages)
        if why is not None:
            bad.append(why)
        return build(self, messages, max_tokens, template)

    monkeypatch.setattr(agent_mod.Agent, "_build", checked)
    res = execute(RunSpec(str(path), ["replay.timing=none"], out_dir=tmp_path / "runs",
                          show_progress=False), echo=lambda _: None)
    return res, bad


@pytest.mark.parametrize("fmt", EACH_FORMAT)
def test_twin_replay_sends_what_was_recorded(tmp_path: Path, fmt: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path, _s = _import(tmp_path, fmt)
    sc, _ = load_scenario(path)
    assert sc.replay is not None
    res, bad = _replay(path, tmp_path, monkeypatch)
    assert res.status == "completed" and bad == []
    df = pd.read_parquet(res.run_dir / "turns.parquet")
    assert df.ok.all()
    turns = df[df.request_kind == "turn"]
    summaries = df[df.request_kind == "summary"].sort_values("turn_index")
    assert len(summaries) == COMPACTIONS.get(fmt, 0)
    pre = [c.compaction.pre_tokens for c in sc.replay.sessions[0].calls if c.compaction]
    for got_pre, rec_pre in zip(summaries.prompt_tokens, pre, strict=True):
        assert rec_pre is not None and abs(got_pre - rec_pre) < 0.10 * rec_pre   # sized as recorded
    errs: list[float] = []
    for i, sess in enumerate(sc.replay.sessions):
        rows = turns[turns.session_id == f"s{i:04d}"].sort_values("turn_index")
        rec = np.array([c.usage.prompt_tokens for c in sess.calls if c.usage])
        got = rows.prompt_tokens.to_numpy()
        assert len(got) == len(rec) == len(sess.calls)            # no call lost
        errs += list(np.abs(got - rec) / rec)
    assert max(errs) < 0.10, (fmt, max(errs), float(np.median(errs)))
