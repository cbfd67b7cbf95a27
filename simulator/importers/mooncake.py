"""Read Mooncake traces (kvcache-ai/Mooncake, FAST'25): JSONL, one request per line,
`{timestamp (ms), input_length, output_length, hash_ids}` with 512-token blocks and
ids global across the file (a trailing partial block has an id too). Dynamo's
variant adds `session_id` (rows of one session are closed-loop turns) and `delay`
(ms after the previous turn); its agentic rows (`request_id`, `wait_for`,
`tool_wait_ms`, …) read as plain session rows, `tool_wait_ms` added to the delay —
the dependency graph (`wait_for`, `branches`) is not modelled. Upstream aliases are
accepted: `input_tokens`, `output_tokens`, `created_time`, `delay_ms`.

Rows without a `session_id` are independent requests: each becomes a one-call
session at its timestamp (only the prefix all sessions share is shared in replay).
Lines stream; per session only the previous row's hash ids are kept. Bounded like
cc-traces (`weka`): a line of at most MAX_LINE_CHARS, at most `weka.MAX_REQUESTS`
rows, every field in its unit and range, a time span of at most a year.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from simulator.errors import InputError
from simulator.importers.trace_build import (
    HashScope,
    TraceRequest,
    TraceSession,
    common_prefix,
    hit_tokens,
)
from simulator.importers.weka import (
    MAX_REQUESTS,
    MAX_TEXT_CHARS,
    MAX_TRACE_S,
    HashId,
    _field,
    check_ids_cover,
    read_count,
    read_ids,
    read_millis,
    read_prompt,
    read_text,
)
from simulator.util import bounded

BLOCK_SIZE = 512
_ALIASES = {"input_tokens": "input_length", "output_tokens": "output_length",
            "created_time": "timestamp", "delay_ms": "delay"}
MAX_LINE_CHARS = 16 << 20     # one row (a 10M-token prompt in 512-token blocks is ~0.2 MB)


def read_mooncake(path: Path, block_size: int = BLOCK_SIZE) -> tuple[list[TraceSession], int]:
    """(sessions in order of first row, the prefix in tokens every session's first
    request shares by its hash ids)."""
    try:
        bounded.regular_file(path, "trace file")
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    try:
        fh = path.open(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        try:
            sessions, shared = _rows(path, fh, block_size)
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text (byte {exc.start} of a chunk)") from None
    return sessions, shared


def _rows(path: Path, fh: IO[str], block_size: int) -> tuple[list[TraceSession], int]:
    scope = HashScope()
    sessions: list[TraceSession] = []
    by_id: dict[str, int] = {}
    prev_ids: dict[int, list[HashId]] = {}
    common: list[HashId] | None = None
    t_prev: dict[int, float] = {}
    t_start, t_end = float("inf"), float("-inf")
    idx = -1
    lineno = 0
    while True:
        lineno += 1
        try:
            line = bounded.read_line(fh, MAX_LINE_CHARS)
        except bounded.JSONLimit as exc:
            raise InputError(f"{path}: request {idx + 1} (line {lineno}): {exc}") from None
        if line is None:
            break
        if not line.strip():
            continue
        idx += 1
        where = f"{path}: request {idx} (line {lineno})"
        if idx >= MAX_REQUESTS:
            raise InputError(f"{where}: more than {MAX_REQUESTS:,} requests; an import "
                             f"holds at most {MAX_REQUESTS:,} (split the trace)")
        d = bounded.json_object(line, where, finite=False)
        for alias, name in _ALIASES.items():
            if alias in d and name not in d:
                d[name] = d[alias]
        ids = _field(d, "hash_ids", where, read_ids, required=True)
        inp = _field(d, "input_length", where, read_prompt, required=True)
        check_ids_cover(ids, inp, block_size, where)
        out = _field(d, "output_length", where, read_count, required=True)
        ts = _field(d, "timestamp", where, read_millis)
        delay = _field(d, "delay", where, read_millis)
        tool_wait = _field(d, "tool_wait_ms", where, read_millis)
        for key, wait in (("delay", delay), ("tool_wait_ms", tool_wait)):
            if wait is not None and wait > MAX_TRACE_S * 1000:
                raise InputError(f"{where}: field '{key}': {wait:g} ms is more than "
                                 f"{MAX_TRACE_S * 1000:,.0f} ms (a year)")
        sid = d.get("session_id")
        if sid is not None and (isinstance(sid, bool) or not isinstance(sid, str | int)
                                or len(str(sid)) > MAX_TEXT_CHARS):
            raise InputError(f"{where}: field 'session_id': expected a string or an "
                             f"integer of at most {MAX_TEXT_CHARS} characters, got "
                             f"{bounded.shown(sid)}")
        si = by_id.get(str(sid)) if sid is not None else None
        first = si is None
        if si is None:
            name = str(sid) if sid is not None else f"r{idx}"
            start = (ts or 0.0) / 1000.0
            sessions.append(TraceSession(name, block_size, 0, start_s=start,
                                         model=_field(d, "model", where, read_text),
                                         source=str(path)))
            si = len(sessions) - 1
            if sid is not None:
                by_id[str(sid)] = si
            common = list(ids) if common is None else common[:common_prefix(common, ids)]
        s = sessions[si]
        think = None if delay is None and tool_wait is None else \
            ((delay or 0.0) + (tool_wait or 0.0)) / 1000.0
        t = ts / 1000.0 - s.start_s if ts is not None \
            else t_prev.get(si, 0.0) + (think or 0.0)
        if t < 0:
            raise InputError(f"{where}: field 'timestamp': earlier than its session's "
                             f"first row")
        span = max(t_end, s.start_s + t) - min(t_start, s.start_s)
        if span > MAX_TRACE_S:
            raise InputError(f"{where}: field 'timestamp': the trace would span "
                             f"{span:,.0f} s (at most {MAX_TRACE_S:,.0f} s, a year)")
        t_start, t_end = min(t_start, s.start_s), max(t_end, s.start_s + t)
        t_prev[si] = t
        prev = prev_ids.get(si)
        s.requests.append(TraceRequest(
            t=t, in_tokens=inp, out_tokens=out, blocks=len(ids),
            shared_prev_blocks=common_prefix(ids, prev) if prev else 0,
            implied_hit_tokens=hit_tokens(scope.observe(ids), len(ids), inp, block_size),
            model=_field(d, "model", where, read_text),
            think_time=None if first else think,
            block_ids=tuple(ids) if first else None))
        if sid is not None:
            prev_ids[si] = list(ids)
    if not sessions:
        raise InputError(f"{path}: no requests (expected JSONL rows with timestamp, "
                         f"input_length, output_length, hash_ids)")
    first_in = min(s.requests[0].in_tokens for s in sessions)
    shared = len(common or []) * block_size if len(sessions) > 1 else 0
    return sessions, max(0, min(shared, first_in - 2 * block_size))
