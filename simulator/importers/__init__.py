"""Importers: real agent session transcripts → replay scenarios.

`import_claude_code` is the library call behind `endurance import claude-code`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from simulator import tokens
from simulator.errors import InputError
from simulator.importers.build import Encoder, call_data, fit_scale, link_subagents
from simulator.importers.claude_code import Transcript, parse_transcripts
from simulator.scenario import content
from simulator.scenario.model import Scenario, SystemSpec, ToolsSpec

VERBATIM_WARNING = ("WARNING: this scenario contains VERBATIM transcript content "
                    "(imported with --keep-content): source code, paths and secrets may be in it.")


@dataclass
class ImportResult:
    data: dict[str, Any]             # the scenario as plain data
    summary: dict[str, Any]          # what was read, for the CLI to print


def _prefix(system_file: Path | None, tools_file: Path | None,
            out_dir: Path) -> tuple[dict[str, Any], dict[str, Any], int]:
    """System and tools sections (files or defaults) and their size in tokens."""
    sys_default = SystemSpec(tokens=3000) if system_file is None else None
    tools_default = ToolsSpec(tokens=16000)
    if system_file is not None:
        text = system_file.read_text(encoding="utf-8")
        system: dict[str, Any] = {"file": os.path.relpath(system_file.resolve(), out_dir.resolve())}
        s_tok = tokens.count(text)
    else:
        assert sys_default is not None
        s_tok = sys_default.tokens or 0
        system = {"tokens": s_tok}
    if tools_file is not None:
        t_tok = content.tools_tokens(content.load_tools_file(tools_file))
        tools: dict[str, Any] = {"file": os.path.relpath(tools_file.resolve(), out_dir.resolve())}
    else:
        t_tok = tools_default.tokens or 0
        tools = {"tokens": t_tok, "count": tools_default.count}
    return system, tools, s_tok + t_tok


def _sessions(t: Transcript, enc: Encoder) -> list[dict[str, Any]]:
    links = link_subagents(t)
    out: list[dict[str, Any]] = []
    for si, s in enumerate(t.sessions):
        d: dict[str, Any] = {"id": f"{'agent' if s.sidechain else 'main'}-{si}",
                             "calls": [call_data(c, enc) for c in s.calls]}
        if si in links:
            p, pc = links[si]
            d.update(parent=p, parent_call=pc,
                     start_offset_s=round(max(0.0, s.first_ts - t.sessions[p].first_ts), 3))
        out.append(d)
    for si, (p, pc) in links.items():
        call = out[p]["calls"][pc]
        call["spawns"] = [*call.get("spawns", []), si]
    return out


def _summary(t: Transcript, fit: Any, prefix_tokens: int) -> dict[str, Any]:
    calls = [c for s in t.sessions for c in s.calls]
    prompts = [c.usage["input_tokens"] + c.usage["cache_read_input_tokens"]
               + c.usage["cache_creation_input_tokens"] for c in calls if c.usage]
    starts = [s.first_ts for s in t.sessions]
    ends = [c.end_ts for c in calls]
    return {
        "files": t.files, "records": t.records, "sessions": sum(not s.sidechain for s in t.sessions),
        "subagents": sum(s.sidechain for s in t.sessions), "calls": len(calls),
        "calls_without_usage": len(calls) - len(prompts),
        "prompt_tokens_total": sum(prompts), "prompt_tokens_max": max(prompts, default=0),
        "output_tokens_total": sum(c.usage["output_tokens"] for c in calls if c.usage),
        "compactions": sum(c.compaction is not None for c in calls),
        "time_span_s": round(max(ends, default=0.0) - min(starts, default=0.0), 1),
        "skipped": dict(sorted(t.skipped.items())), "malformed_at": list(t.malformed),
        "token_scale": round(fit.scale, 4), "thinking_in_context": fit.thinking_in_context,
        "fit_rms_share": round(fit.residual_share, 4), "prefix_tokens": prefix_tokens,
        "fitted_prefix_tokens": None if fit.free_prefix_tokens is None
        else round(fit.free_prefix_tokens)}


def import_claude_code(paths: list[Path], *, out_path: Path, keep_content: bool = False,
                       system_file: Path | None = None, tools_file: Path | None = None,
                       seed: int = 0, strict: bool = False, name: str | None = None) -> ImportResult:
    """Read Claude Code transcripts and build a validated replay scenario."""
    t = parse_transcripts(paths, strict=strict)
    system, tools, prefix_tokens = _prefix(system_file, tools_file, out_path.parent)
    fit = fit_scale(t.sessions, prefix_tokens)
    enc = Encoder(fit.scale, keep_content)
    sessions = _sessions(t, enc)
    replay: dict[str, Any] = {
        "token_scale": round(fit.scale, 6), "thinking_in_context": fit.thinking_in_context,
        "contains_verbatim_content": keep_content, "sessions": sessions}
    if keep_content:
        replay["texts"] = enc.texts
    else:
        replay["span_tokens"] = enc.anon.span_tokens
        replay["span_kinds"] = "".join(enc.anon.span_kinds)
    data: dict[str, Any] = {
        "name": name or out_path.stem,
        "description": f"Replay of {len(t.sessions)} Claude Code session(s) "
                       f"({'VERBATIM content' if keep_content else 'anonymised: sizes and structure only'})",
        "contains_verbatim_content": keep_content, "seed": seed,
        "sessions": len(sessions), "turns": max(len(s["calls"]) for s in sessions),
        "system": system, "tools": tools, "compaction": {"kind": "none"},
        "turn_templates": [], "replay": replay}
    try:
        Scenario.model_validate({**data, "base_dir": str(out_path.parent)})
    except ValueError as exc:
        raise InputError(f"imported scenario does not validate: {exc}") from None
    return ImportResult(data, _summary(t, fit, prefix_tokens))


def scenario_yaml(data: dict[str, Any]) -> str:
    """The scenario as YAML, with a loud header when it holds verbatim content."""
    head = (f"# {VERBATIM_WARNING}\n" if data.get("contains_verbatim_content") else
            "# Imported from Claude Code transcripts; anonymised: structure and token sizes "
            "only, every text is seeded synthetic content.\n")
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=None,
                     width=100, allow_unicode=True)
    return head + body
