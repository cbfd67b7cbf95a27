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
Lines stream; per session only the previous row's hash ids are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from simulator.errors import InputError
from simulator.importers.trace_build import (
    HashScope,
    TraceRequest,
    TraceSession,
    common_prefix,
    hit_tokens,
)
from simulator.importers.weka import _field

BLOCK_SIZE = 512
_ALIASES = {"input_tokens": "input_length", "output_tokens": "output_length",
            "created_time": "timestamp", "delay_ms": "delay"}


def read_mooncake(path: Path, block_size: int = BLOCK_SIZE) -> tuple[list[TraceSession], int]:
    """(sessions in order of first row, the prefix in tokens every session's first
    request shares by its hash ids)."""
    try:
        fh = path.open(encoding="utf-8")
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
    prev_ids: dict[int, list[Any]] = {}
    common: list[Any] | None = None
    t_prev: dict[int, float] = {}
    idx = -1
    for lineno, line in enumerate(fh, 1):
        if not line.strip():
            continue
        idx += 1
        where = f"{path}: request {idx} (line {lineno})"
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: not UTF-8 text (byte {exc.start})") from None
        if not isinstance(d, dict):
            raise InputError(f"{where}: expected a JSON object")
        for alias, name in _ALIASES.items():
            if alias in d and name not in d:
                d[name] = d[alias]
        ids = _field(d, "hash_ids", where, "ids", required=True)
        inp = _field(d, "input_length", where, "count", required=True)
        out = _field(d, "output_length", where, "count", required=True)
        ts = _field(d, "timestamp", where, "seconds")
        delay = _field(d, "delay", where, "seconds")
        tool_wait = _field(d, "tool_wait_ms", where, "seconds")
        sid = d.get("session_id")
        if sid is not None and not isinstance(sid, str | int):
            raise InputError(f"{where}: field 'session_id': expected a string")
        si = by_id.get(str(sid)) if sid is not None else None
        first = si is None
        if si is None:
            name = str(sid) if sid is not None else f"r{idx}"
            start = (ts or 0.0) / 1000.0
            sessions.append(TraceSession(name, block_size, 0, start_s=start,
                                         model=_field(d, "model", where, "text"),
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
        t_prev[si] = t
        prev = prev_ids.get(si)
        s.requests.append(TraceRequest(
            t=t, in_tokens=inp, out_tokens=out, blocks=len(ids),
            shared_prev_blocks=common_prefix(ids, prev) if prev else 0,
            implied_hit_tokens=hit_tokens(scope.observe(ids), len(ids), inp, block_size),
            model=_field(d, "model", where, "text"),
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
