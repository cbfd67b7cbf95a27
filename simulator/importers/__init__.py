"""Importers: real agent session transcripts → replay scenarios.

`import_claude_code` is the library call behind `endurance import claude-code`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from simulator.errors import InputError, ScenarioError
from simulator.importers import predictability
from simulator.importers.build import (
    Encoder,
    Fit,
    call_data,
    fit_scale,
    link_subagents,
    planned_errors,
)
from simulator.importers.claude_code import Transcript, parse_transcripts, prompt_tokens
from simulator.importers.predictability import HiddenThinking
from simulator.importers.trace_import import validate_imported
from simulator.scenario import content
from simulator.scenario.load import load_tools_file
from simulator.util import tokens
from simulator.util.jsontypes import JSONObject, JSONValue
from simulator.util.numbers import to_int

VERBATIM_WARNING = ("WARNING: this scenario contains VERBATIM transcript content "
                    "(imported with --keep-content): source code, paths and secrets may be in it.")


@dataclass
class ImportResult:
    data: JSONObject             # the scenario as plain data
    summary: dict[str, object]       # what was read, for the CLI to print


SYSTEM_DEFAULT_TOKENS = 3000     # Claude Code's own system prompt, ~3k tokens
FALLBACK_PREFIX_TOKENS = 19000   # used only when no call has usage to size it from
PREFIX_SAME_SHARE = 0.02         # a session prefix within 2% of the main one shares it


def _read_system(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read system file ({exc.strerror})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: --system-file: expected UTF-8 text, byte {exc.start} "
                         f"is not (0x{raw[exc.start]:02x})") from None


def _tools_tokens(path: Path) -> int:
    try:
        return content.tools_tokens(load_tools_file(path))
    except ScenarioError as exc:
        why = str(exc).replace(f"{path}: ", "").strip().splitlines()
        why = why or ["unreadable"]
        raise InputError(f"{path}: --tools-file: expected a JSON/YAML list of tool "
                         f"definitions, each with a 'name' ({why[0][:120]})") from None


def _main_prefix(t: Transcript, prefixes: list[int | None]) -> int:
    """The main sessions' system+tools size (median of their first calls' figures)."""
    main = sorted(p for s, p in zip(t.sessions, prefixes, strict=True)
                  if p is not None and not s.sidechain)
    main = main or sorted(p for p in prefixes if p is not None)
    return main[len(main) // 2] if main else FALLBACK_PREFIX_TOKENS


def _prefix(t: Transcript, system_file: Path | None, tools_file: Path | None,
            out_dir: Path) -> tuple[JSONObject, JSONObject, Fit, int]:
    """System and tools sections, and the fit. Without files both are sized from the
    recorded first calls (cache creation + cache read + input, minus the first
    message): system ~3k tokens as Claude Code's, tools the rest."""
    s_tok = tokens.count(_read_system(system_file)) if system_file is not None else None
    t_tok = _tools_tokens(tools_file) if tools_file is not None else None
    fixed = s_tok is not None and t_tok is not None
    fit = fit_scale(t.sessions, (s_tok or 0) + (t_tok or 0), main_prefix_fixed=fixed)
    total = _main_prefix(t, fit.prefixes) if not fixed else (s_tok or 0) + (t_tok or 0)
    if s_tok is None:
        s_tok = max(0, total - t_tok) if t_tok is not None else min(SYSTEM_DEFAULT_TOKENS,
                                                                     total // 4)
    if t_tok is None:
        t_tok = max(0, total - s_tok)
    system: JSONObject = ({"tokens": s_tok} if system_file is None else
                              {"file": os.path.relpath(system_file.resolve(), out_dir.resolve())})
    tools: JSONObject = (
        {"tokens": t_tok, "count": max(1, min(16, t_tok // 800))} if tools_file is None
        else {"file": os.path.relpath(tools_file.resolve(), out_dir.resolve())})
    main_total = s_tok + t_tok
    final: list[int | None] = []
    for s, p in zip(t.sessions, fit.prefixes, strict=True):
        same = p is None or (fixed and not s.sidechain) \
            or abs(p - main_total) <= max(50, PREFIX_SAME_SHARE * main_total)
        final.append(None if same else p)
    fit.errors = planned_errors(fit, [main_total if p is None else p for p in final],
                                [not (fixed and not s.sidechain) for s in t.sessions])
    fit.prefixes = final
    return system, tools, fit, main_total


def _sessions(t: Transcript, enc: Encoder, prefixes: list[int | None],
              fractions: list[list[float]] | None = None,
              edit_shares: list[list[float | None]] | None = None,
              paces: list[list[float]] | None = None) -> list[JSONObject]:
    links = link_subagents(t)
    calls_of: list[list[JSONObject]] = []
    for si, s in enumerate(t.sessions):
        calls = [call_data(c, enc) for c in s.calls]
        if fractions is not None:     # the twin copies as the real text did
            for call, f in zip(calls, fractions[si], strict=True):
                call["repeat_fraction"] = f
        for call, e in zip(calls, edit_shares[si] if edit_shares else [], strict=False):
            if e is not None:         # copies beyond what the default edits allow
                call["edit_share"] = e
        for call, tpp in zip(calls, paces[si] if paces else [], strict=False):
            call["tokens_per_pass"] = tpp     # the twin paces its reply to the real's
        calls_of.append(calls)
    spawns: dict[tuple[int, int], list[JSONValue]] = {}
    for si, (p, pc) in links.items():
        spawns.setdefault((p, pc), []).append(si)
    for (p, pc), children in spawns.items():
        calls_of[p][pc]["spawns"] = children
    out: list[JSONObject] = []
    for si, (s, calls) in enumerate(zip(t.sessions, calls_of, strict=True)):
        d: JSONObject = {"id": f"{'agent' if s.sidechain else 'main'}-{si}",
                         "calls": list[JSONValue](calls)}
        if si in links:
            p, pc = links[si]
            d.update(parent=p, parent_call=pc,
                     start_offset_s=round(max(0.0, s.first_ts - t.sessions[p].first_ts), 3))
        if prefixes[si] is not None:
            d["prefix_tokens"] = prefixes[si]
        out.append(d)
    return out


def pairing(t: Transcript) -> tuple[int, int, int]:
    """(tool calls, calls answered by a result in the next request, calls left
    unanswered although a next request followed — a real server refuses that)."""
    uses = paired = unanswered = 0
    for s in t.sessions:
        for i, c in enumerate(s.calls):
            ids = {b.id for b in c.assistant if b.kind == "tool_use"}
            uses += len(ids)
            if i + 1 < len(s.calls):
                got = {b.id for b in s.calls[i + 1].user if b.kind == "tool_result"}
                paired += len(ids & got)
                unanswered += len(ids - got)
    return uses, paired, unanswered


def _summary(t: Transcript, fit: Fit, prefix_tokens: int) -> JSONObject:
    calls = [c for s in t.sessions for c in s.calls]
    prompts = [prompt_tokens(c.usage) for c in calls if c.usage]
    starts = [s.first_ts for s in t.sessions]
    ends = [c.end_ts for c in calls]
    uses, paired, unanswered = pairing(t)
    errs = sorted(abs(e) for e in fit.errors)
    return {
        "files": t.files, "records": t.records, "sessions": sum(not s.sidechain for s in t.sessions),
        "subagents": sum(s.sidechain for s in t.sessions), "calls": len(calls),
        "calls_found": t.found_calls,
        "calls_without_usage": len(calls) - len(prompts),
        "prompt_tokens_total": sum(prompts), "prompt_tokens_max": max(prompts, default=0),
        "output_tokens_total": sum(c.usage["output_tokens"] for c in calls if c.usage),
        "compactions": sum(c.compaction is not None for c in calls),
        "compactions_found": t.compactions_found,
        "tool_calls": uses, "tool_results_paired": paired, "tool_calls_unanswered": unanswered,
        "dropped": dict(sorted(t.dropped.items())),
        "context_error_median": round(errs[len(errs) // 2], 4) if errs else None,
        "context_error_max": round(errs[-1], 4) if errs else None,
        "context_error_bias": round(sum(fit.errors) / len(errs), 4) if errs else None,
        "context_error_points": len(errs),
        "time_span_s": round(max(ends, default=0.0) - min(starts, default=0.0), 1),
        "skipped": dict(sorted(t.skipped.items())), "malformed_at": list(t.malformed),
        "token_scale": round(fit.scale, 4), "thinking_in_context": fit.thinking_in_context,
        "fit_rms_share": round(fit.residual_share, 4), "prefix_tokens": prefix_tokens,
        "subagent_prefix_tokens": list[JSONValue](sorted({p for p in fit.prefixes
                                                          if p is not None})),
        "fitted_prefix_tokens": None if fit.free_prefix_tokens is None
        else round(fit.free_prefix_tokens)}


def lost(summary: Mapping[str, object]) -> int:
    """What `--strict` refuses: conversation records dropped, responses found but not
    imported, tool calls left unanswered."""
    dropped = summary["dropped"]
    n = sum(map(to_int, dropped.values())) if isinstance(dropped, dict) else 0
    n += max(0, to_int(summary["calls_found"]) - to_int(summary["calls"]))
    return n + to_int(summary["tool_calls_unanswered"])


def import_claude_code(paths: list[Path], *, out_path: Path, keep_content: bool = False,
                       system_file: Path | None = None, tools_file: Path | None = None,
                       seed: int = 0, strict: bool = False, name: str | None = None,
                       hidden_thinking: HiddenThinking = "match-visible") -> ImportResult:
    """Read Claude Code transcripts and build a validated replay scenario. Each call
    carries the `tokens_per_pass` the twin paces its reply to, so that it is as
    predictable as the real one, hidden thinking included unless told otherwise
    (`importers.predictability`), and the open-loop `repeat_fraction`."""
    t = parse_transcripts(paths, strict=strict)
    system, tools, fit, prefix_tokens = _prefix(t, system_file, tools_file, out_path.parent)
    enc = Encoder(fit.scale, keep_content)
    measures = predictability.measure(t, fit.scale)
    sessions = _sessions(t, enc, fit.prefixes,
                         *predictability.copy_knobs(measures, hidden_thinking),
                         predictability.targets(measures, hidden_thinking))
    replay: JSONObject = {
        "token_scale": round(fit.scale, 6), "thinking_in_context": fit.thinking_in_context,
        "contains_verbatim_content": keep_content, "sessions": list[JSONValue](sessions)}
    if keep_content:
        replay["texts"] = list[JSONValue](enc.texts)
    else:
        replay["span_tokens"] = list[JSONValue](enc.anon.span_tokens)
        replay["span_kinds"] = "".join(enc.anon.span_kinds)
    data: JSONObject = {
        "name": name or out_path.stem,
        "description": f"Replay of {len(t.sessions)} Claude Code session(s) "
                       f"({'VERBATIM content' if keep_content else 'anonymised: sizes and structure only'})",
        "contains_verbatim_content": keep_content, "seed": seed,
        "sessions": len(sessions), "turns": max(len(s.calls) for s in t.sessions),
        "system": system, "tools": tools, "compaction": {"kind": "none"},
        # A replay is only faithful when every recorded session ran: one failed session
        # fails the run (exit 1) instead of a quiet partial replay.
        "limits": {"max_failed_sessions_frac": 0.0},
        "turn_templates": [], "replay": replay}
    validate_imported(data, out_path)
    return ImportResult(data, {**_summary(t, fit, prefix_tokens),
                               **predictability.summary(measures, hidden_thinking)})


def scenario_yaml(data: Mapping[str, object]) -> str:
    """The scenario as YAML, with a loud header when it holds verbatim content."""
    head = (f"# {VERBATIM_WARNING}\n" if data.get("contains_verbatim_content") else
            "# Imported from Claude Code transcripts; anonymised: structure and token sizes "
            "only, every text is seeded synthetic content.\n")
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=None,
                     width=100, allow_unicode=True)
    return head + body
