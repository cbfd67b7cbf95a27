"""A team's telemetry → a team replay scenario (`endurance import claude-code-otel |
otel-genai`): read (`otlp_read`), map (`otel_events`), assemble the day (`team`), slice
and scale it, and build the scenario through the trace importers' path
(`trace_import.build_scenario`), with `replay.timing: arrivals` and the day's
concurrency profile in `replay.team`. Sizes only: no text is read into the scenario.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from simulator.errors import InputError
from simulator.importers import team
from simulator.importers.otel_events import TeamLog, claude_code_events, genai_spans
from simulator.importers.otlp_read import Signal, otlp_files, read_records, signal_of
from simulator.importers.trace_import import (
    TraceImport,
    TraceSummary,
    build_scenario,
    validate_imported,
)
from simulator.scenario.load import LOAD_MEMORY_BYTES, MAX_NODES
from simulator.util.jsontypes import JSONValue

Source = Literal["claude-code-otel", "otel-genai"]
_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")
MAX_SCALE = 100.0
# A team replay's request is ~44 YAML nodes of its scenario (a call, its usage, its two
# blocks); the bound is the scenario loader's memory bound (`scenario.load.MAX_NODES`:
# ~700 bytes a node), not a count picked for speed: a whole day imports and replays.
NODES_PER_REQUEST = 44
MAX_TEAM_REQUESTS = MAX_NODES // NODES_PER_REQUEST


def parse_window(text: str) -> tuple[float, float]:
    """'10:00-11:00' → (36000, 39600) s since midnight; '23:00-24:00' reaches midnight."""
    m = _WINDOW.match(text)
    if not m:
        raise InputError(f"--window: expected HH:MM-HH:MM (UTC), e.g. 10:00-11:00, got {text!r}")
    h0, m0, h1, m1 = (int(g) for g in m.groups())
    a, b = h0 * 3600 + m0 * 60, h1 * 3600 + m1 * 60
    if max(m0, m1) > 59 or a >= 86_400 or b > 86_400 or b <= a:
        raise InputError(f"--window: {text!r} is not a span within one day (UTC)")
    return float(a), float(b)


def read_log(paths: list[Path], source: Source) -> TeamLog:
    """The records of `paths` for `source`; a file of the other signal given to it (spans
    to Claude Code's importer, events to the GenAI one) is named, with the command that
    reads it, when the import found nothing in it or failed on it."""
    try:
        if source == "claude-code-otel":
            log = claude_code_events(read_records(paths, "logs"))
        else:
            log = genai_spans(read_records(paths, "spans"))
    except InputError:
        _wrong_signal(paths, source)
        raise
    if not log.requests:
        _wrong_signal(paths, source)
    return log


def _wrong_signal(paths: list[Path], source: Source) -> None:
    want: Signal = "logs" if source == "claude-code-otel" else "spans"
    for f in otlp_files(paths):
        got = signal_of(f)
        if got is None or got == want:
            continue
        if source == "claude-code-otel":
            raise InputError(f"{f}: OTLP spans (traces), not log records: `endurance import "
                             "claude-code-otel` reads Claude Code's events (its logs, "
                             "OTEL_LOGS_EXPORTER=otlp); for OTel GenAI spans run `endurance "
                             f"import otel-genai {f}`")
        raise InputError(f"{f}: OTLP log records (events), not spans: `endurance import "
                         "otel-genai` reads OTel GenAI spans (traces); for Claude Code's "
                         f"events run `endurance import claude-code-otel {f}`")


def import_team(paths: list[Path], source: Source, *, out_path: Path, seed: int = 0,
                window: str | None = None, busiest_s: float | None = None,
                scale: float = 1.0, name: str | None = None) -> TraceImport:
    if window is not None and busiest_s is not None:
        raise InputError("--window and --busiest: give one")
    if not 0 < scale <= MAX_SCALE:
        raise InputError(f"--scale: expected a factor in (0, {MAX_SCALE:g}], got {scale:g}")
    log = read_log(paths, source)
    try:
        return _build(log, source, paths, out_path, seed, window, busiest_s, scale, name)
    except InputError as exc:
        named = ", ".join(map(str, paths))
        if str(exc).startswith(named):
            raise
        raise InputError(f"{named}: {exc}") from None


def _build(log: TeamLog, source: Source, paths: list[Path], out_path: Path, seed: int,
           window: str | None, busiest_s: float | None, scale: float,
           name: str | None) -> TraceImport:
    day = team.streams(log)
    if scale != 1.0:
        day = team.scale(day, scale, seed)
    d0 = team.day_start(day)
    last = max(s.end_s for s in day)
    label: str | None = None
    replay = day
    if window is not None:
        a, b = parse_window(window)
        replay, label = team.window(day, d0 + a, d0 + b), window.strip()
        t0, t1 = d0 + a, d0 + b
    elif busiest_s is not None:
        t0, t1 = team.busiest(day, busiest_s)
        replay, label = team.window(day, t0, t1), f"busiest {_dur(busiest_s)}"
    else:
        t0, t1 = min(s.start_s for s in day), last
    n_req = sum(len(s.requests) for s in replay)
    if n_req > MAX_TEAM_REQUESTS:
        raise InputError(f"{'the day' if label is None else label} holds {n_req:,} requests; "
                         f"a scenario holds at most {MAX_TEAM_REQUESTS:,} (about "
                         f"{LOAD_MEMORY_BYTES // 2**30} GiB to load; replay a slice: "
                         "--busiest 1h or --window HH:MM-HH:MM)")
    t0 = min(t0, min(s.start_s for s in replay))
    base = team.shared_prefix(replay)
    sessions = [team.trace_session(s, t0, base) for s in replay]
    built = build_scenario(
        sessions, name=name or out_path.stem, fmt=source, seed=seed, base_prefix=base,
        system_tokens=base, tool_tokens=0, out_path=out_path)
    data, summary = built.data, built.summary
    day_profile = team.profile(day, d0, team.PROFILE_STEP_S, last)
    team_sessions = len({s.session for s in replay})
    day_sessions = len({s.session for s in day})
    built.replay["timing"] = "arrivals"
    built.replay["team"] = {
        "source": source, "day_start_unix_s": d0, "replay_start_s": round(t0 - d0, 3),
        "replay_end_s": round(t1 - d0, 3), "window": label, "scale": scale,
        "sessions": team_sessions, "day_sessions": day_sessions,
        "profile_step_s": team.PROFILE_STEP_S, "day_profile": list[JSONValue](day_profile)}
    data["description"] = (f"Team replay from {source} telemetry: {built.sessions} "
                           f"stream(s) of {team_sessions} session(s), "
                           f"{n_req} requests at their recorded times; sizes only, "
                           "synthetic text")
    validate_imported(data, out_path)
    summary.update(TraceSummary(
        files=len(paths), files_rejected=0,
        records=log.records, prompts=log.prompts,
        prompt_texts_dropped=log.prompt_texts_dropped, tool_runs=len(log.tools),
        skipped=dict(sorted(log.skipped.items())), window=label, scale=scale,
        streams=len(replay), team_sessions=team_sessions, day_sessions=day_sessions,
        day_requests=sum(len(s.requests) for s in day),
        peak_in_flight=team.peak_at_once(team.session_spans(day).values())[0],
        peak_streams_in_flight=team.peak_at_once((x.start_s, x.end_s) for x in day)[0],
        replay_start=_clock(t0 - d0),
        replay_end=_clock(t1 - d0)))
    return TraceImport(data, summary)


def _dur(s: float) -> str:
    return f"{s / 3600:g}h" if s % 3600 == 0 else f"{s / 60:g}m" if s % 60 == 0 else f"{s:g}s"


def _clock(s: float) -> str:
    d, rem = divmod(int(s), 86_400)
    return f"{'day ' + str(d + 1) + ' ' if d else ''}{rem // 3600:02d}:{rem % 3600 // 60:02d}"


def format_team_summary(s: TraceSummary, out: Path | None) -> str:
    share = s["implied_cache_read_share"]
    scaled = f", team scaled x{s['scale']:g}" if s["scale"] != 1 else ""
    lines = [
        f"read {s['records']:,} {s['format']} records: {s['day_requests']:,} requests of "
        f"{s['day_sessions']} session(s) in the day, {s['prompts']:,} user prompts, "
        f"{s['tool_runs']:,} tool runs"
        + (f"; skipped {', '.join(f'{k} {v}' for k, v in s['skipped'].items())}"
           if s["skipped"] else ""),
        f"replay: {s['window'] or 'the whole day'} ({s['replay_start']}–{s['replay_end']} UTC)"
        f"{scaled}: "
        f"{s['requests']:,} requests in {s['streams']} stream(s) of {s['team_sessions']} "
        f"session(s); peak {s['peak_in_flight']:,} session(s) and "
        f"{s['peak_streams_in_flight']:,} stream(s) in flight at once over the day",
        f"tokens: prompt {s['prompt_tokens_total']:,} total (max {s['prompt_tokens_max']:,}), "
        f"output {s['output_tokens_total']:,}; recorded cache-read share "
        f"{'n/a' if share is None else f'{share:.1%}'}; context drops "
        + (", ".join(f"{k} {v}" for k, v in s["drops"].items()) or "none")]
    if s["prompt_texts_dropped"]:
        lines.append(f"{s['prompt_texts_dropped']:,} prompt text(s) in the telemetry: "
                     "dropped, not kept")
    if out is not None:
        lines.append(f"wrote {out} (validated); sizes and times only, synthetic text; "
                     f"`endurance size {out} --slo …` sizes its cards")
    return "\n".join(lines)
