"""Block-hash trace files → a validated replay scenario (`endurance import weka|mooncake`).

Both formats land in the same replay script as Claude Code transcripts
(`Scenario.replay`, replayed by `session.replay_agent`): `replay.compaction: auto`
replays the recorded context drops unless `--set compaction.kind=…` names a policy,
in which case the conversation is rebuilt from the per-turn additions only and the
policy compacts it. Anonymous by construction: a trace has no text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from simulator.errors import InputError
from simulator.importers.mooncake import read_mooncake
from simulator.importers.trace_build import SpanTable, TraceSession, implied_share, replay_sessions
from simulator.importers.weka import read_trace, trace_files
from simulator.scenario.model import Scenario
from simulator.util.jsontypes import JSONObject, JSONValue

WINDOW_MARGIN = 4096        # context window: the largest recorded prompt + reply + this


class TraceSummary(TypedDict, total=False):
    """What a trace or team import read, for the CLI to print (`format_summary`,
    `team_import.format_team_summary`)."""

    format: str
    files: int
    files_rejected: int
    hash_id_scope: list[str]
    sessions: int
    subagents: int
    requests: int
    prompt_tokens_total: int
    prompt_tokens_max: int
    output_tokens_total: int
    implied_cache_read_share: float | None
    drops: dict[str, int]
    block_size: int
    shared_prefix_tokens: int | None
    models: list[str]
    time_span_s: float
    # a team's telemetry (`team_import`)
    records: int
    prompts: int
    prompt_texts_dropped: int
    tool_runs: int
    skipped: dict[str, int]
    window: str | None
    scale: float
    streams: int
    team_sessions: int
    day_sessions: int
    day_requests: int
    peak_in_flight: int
    peak_streams_in_flight: int
    replay_start: str
    replay_end: str


@dataclass
class TraceImport:
    data: JSONObject
    summary: TraceSummary
    file_errors: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Built:
    """`build_scenario`'s scenario, its `replay` section (the same object, for a caller
    that adds to it), how many replay sessions it holds, and the summary."""

    data: JSONObject
    replay: JSONObject
    sessions: int
    summary: TraceSummary


def read_weka_paths(paths: list[Path]) -> tuple[list[TraceSession], list[str], int, list[str]]:
    """Sessions of every readable file; a bad file is one error line and is skipped
    (a single given file re-raises). Returns (sessions, errors, files read, scopes)."""
    files = list(trace_files(paths))
    if not files:
        raise InputError(f"{', '.join(map(str, paths))}: no *.json trace files")
    sessions: list[TraceSession] = []
    errors: list[str] = []
    scopes: list[str] = []
    for f in files:
        try:
            got, head = read_trace(f)
        except InputError as exc:
            if len(files) == 1:
                raise
            errors.append(str(exc))
            continue
        off = len(sessions)
        for s in got:
            if s.parent is not None:
                s.parent += off
        sessions.extend(got)
        scopes.append(str(head.get("hash_id_scope") or "local"))
    if not sessions:
        raise InputError(f"no trace could be read ({len(errors)} file(s) rejected):\n"
                         + "\n".join(errors))
    return sessions, errors, len(files) - len(errors), scopes


def _summary(sessions: list[TraceSession], drops: dict[str, int], files: int,
             fmt: str, base_prefix: int | None) -> TraceSummary:
    reqs = [r for s in sessions for r in s.requests]
    ins = [r.in_tokens for r in reqs]
    share = implied_share(sessions)
    return {
        "format": fmt, "files": files, "sessions": sum(s.parent is None for s in sessions),
        "subagents": sum(s.parent is not None for s in sessions), "requests": len(reqs),
        "prompt_tokens_total": sum(ins), "prompt_tokens_max": max(ins),
        "output_tokens_total": sum(r.out_tokens for r in reqs),
        "implied_cache_read_share": None if share is None else round(share, 4),
        "drops": dict(sorted(drops.items())),
        "block_size": sessions[0].block_size, "shared_prefix_tokens": base_prefix,
        "models": sorted({r.model for r in reqs if r.model}),
        "time_span_s": round(max(s.start_s + s.requests[-1].t for s in sessions
                                 if s.parent is None), 1)}


def build_scenario(sessions: list[TraceSession], *, name: str, fmt: str, seed: int,
                   base_prefix: int | None, system_tokens: int, tool_tokens: int,
                   out_path: Path) -> Built:
    spans = SpanTable()
    drops: dict[str, int] = {}
    replay_s = replay_sessions(sessions, base_prefix, spans, drops)
    reqs = [r for s in sessions for r in s.requests]
    window = max(262_144, max(r.in_tokens + r.out_tokens for r in reqs) + WINDOW_MARGIN)
    replay: JSONObject = {
        "compaction": "auto", "summary_request": False, "token_scale": 1.0,
        "span_tokens": list[JSONValue](spans.tokens), "span_kinds": "p" * len(spans.tokens),
        "sessions": list[JSONValue](replay_s)}
    data: JSONObject = {
        "name": name, "seed": seed,
        "description": f"Replay of a {fmt} trace: {len(reqs)} requests in {len(sessions)} "
                       f"session(s); sizes, timings and hash-implied prefix sharing, "
                       f"synthetic text",
        "sessions": len(replay_s), "turns": max(map(len, calls_of(replay_s))),
        "system": {"tokens": system_tokens},
        "tools": {"tokens": tool_tokens, "count": max(0, min(16, tool_tokens // 800))},
        "compaction": {"kind": "none"}, "context_window_tokens": window,
        "max_tokens": max(1, max(r.out_tokens for r in reqs)),
        "record_blocks": True,
        "limits": {"max_failed_sessions_frac": 0.0},
        "turn_templates": [], "replay": replay}
    validate_imported(data, out_path)
    return Built(data, replay, len(replay_s), _summary(sessions, drops, 0, fmt, base_prefix))


def calls_of(replay_sessions: list[JSONObject]) -> list[list[JSONValue]]:
    """Each replay session's calls."""
    return [c if isinstance(c := s["calls"], list) else [] for s in replay_sessions]


def validate_imported(data: JSONObject, out_path: Path) -> None:
    """An importer's scenario must load as `run` will load it (relative files resolve
    from the output's folder); InputError otherwise."""
    try:
        Scenario.model_validate({**data, "base_dir": str(out_path.parent)})
    except ValueError as exc:
        raise InputError(f"imported scenario does not validate: {exc}") from None


def import_weka(paths: list[Path], *, out_path: Path, seed: int = 0,
                name: str | None = None) -> TraceImport:
    """cc-traces files or folders → a replay scenario. Prefixes: with `local` hash ids
    (numbered per conversation: nothing shared across sessions) every session gets
    its own system+tools; one `global` trace shares its main prefix with sub-agents
    recorded with the same sizes."""
    sessions, errors, files, scopes = read_weka_paths(paths)
    main = sessions[0]
    shared = files == 1 and scopes == ["global"]
    base = main.prefix_tokens if shared else None
    built = build_scenario(
        sessions, name=name or out_path.stem, fmt="weka", seed=seed, base_prefix=base,
        system_tokens=main.system_tokens if shared else 0,
        tool_tokens=(main.prefix_tokens - main.system_tokens) if shared else 0,
        out_path=out_path)
    built.summary.update(TraceSummary(files=files, files_rejected=len(errors),
                                      hash_id_scope=sorted(set(scopes))))
    return TraceImport(built.data, built.summary, errors)


def import_mooncake(path: Path, *, out_path: Path, seed: int = 0, block_size: int = 512,
                    name: str | None = None) -> TraceImport:
    sessions, shared = read_mooncake(path, block_size)
    t0 = min(s.start_s for s in sessions)
    for s in sessions:
        s.start_s -= t0
        s.prefix_tokens = shared
    built = build_scenario(
        sessions, name=name or out_path.stem, fmt="mooncake", seed=seed, base_prefix=shared,
        system_tokens=shared, tool_tokens=0, out_path=out_path)
    built.summary.update(TraceSummary(files=1, files_rejected=0))
    return TraceImport(built.data, built.summary)


def format_summary(s: TraceSummary, out: Path | None, errors: list[str]) -> str:
    share = s["implied_cache_read_share"]
    lines = [
        f"read {s['files']} {s['format']} file(s): {s['sessions']} session(s), "
        f"{s['subagents']} sub-agent(s), {s['requests']} requests",
        f"tokens: prompt {s['prompt_tokens_total']:,} total (max {s['prompt_tokens_max']:,}), "
        f"output {s['output_tokens_total']:,}; time span {s['time_span_s']:,.0f} s",
        f"hash-implied cache-read share {'n/a' if share is None else f'{share:.1%}'} "
        f"({s['block_size']}-token blocks); context drops "
        + (", ".join(f"{k} {v}" for k, v in s["drops"].items()) or "none")]
    for e in errors:
        lines.append(f"skipped: {e}")
    if out is not None:
        lines.append(f"wrote {out} (validated); replays as recorded, or under a policy: "
                     f"--set compaction.kind=…")
    return "\n".join(lines)
