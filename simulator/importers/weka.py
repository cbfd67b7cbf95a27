"""Read Weka / SemiAnalysis cc-traces (callanjfox/agentic-coding-analysis
`docs/TRACE_FORMAT.md`): one JSON object per conversation with `block_size`,
`tool_tokens`, `system_tokens` and `requests[{t, type: n|s|subagent, model, in, out,
hash_ids, input_types, output_types, stop, api_time, ttft, think_time}]`; a
`subagent` entry carries its own `requests`, `tool_tokens`, `system_tokens` and its
start `t` on the parent's clock.

The file is streamed (`trace_stream`): per request only its sizes and two block
counts are kept (shared with the session's previous request, already seen in the
file: ids are numbered per conversation), never the hash ids themselves. A
malformed request is one `InputError` naming the file, the request and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.importers.trace_build import (
    HashScope,
    TraceRequest,
    TraceSession,
    common_prefix,
    hit_tokens,
)
from simulator.importers.trace_stream import ITEMS, StreamError, iter_object

REQUEST_TYPES = frozenset({"n", "s", "subagent"})


def _field(d: dict[str, Any], key: str, where: str, kind: str, required: bool = False) -> Any:
    v = d.get(key)
    if v is None:
        if required:
            raise InputError(f"{where}: field '{key}': missing")
        return None
    ok = {"count": isinstance(v, int) and not isinstance(v, bool) and v >= 0,
          "seconds": isinstance(v, int | float) and not isinstance(v, bool) and v >= 0,
          "text": isinstance(v, str),
          "texts": isinstance(v, list) and all(isinstance(x, str) for x in v),
          "ids": isinstance(v, list) and all(isinstance(x, int | str) and not isinstance(x, bool)
                                             for x in v)}[kind]
    if not ok:
        want = {"count": "a non-negative integer", "seconds": "a non-negative number",
                "text": "a string", "texts": "a list of strings",
                "ids": "a list of integer (or string) hash ids"}[kind]
        raise InputError(f"{where}: field '{key}': expected {want}, got {str(v)[:40]!r}")
    return v


class _Reader:
    """Turns the stream of request objects into sessions (main first, sub-agents after)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.scope = HashScope()
        self.sessions: list[TraceSession] = []
        self.prev_ids: dict[int, list[Any]] = {}

    def session(self, name: str, parent: int | None, start: float, tool: int, system: int,
                block_size: int) -> int:
        self.sessions.append(TraceSession(name, block_size, tool + system, tool, system,
                                          parent=parent, start_s=start, source=str(self.path)))
        return len(self.sessions) - 1

    def request(self, si: int, d: Any, where: str) -> None:
        if not isinstance(d, dict):
            raise InputError(f"{where}: expected an object, got {str(d)[:40]!r}")
        kind = d.get("type", "s")
        if kind not in REQUEST_TYPES:
            raise InputError(f"{where}: field 'type': expected one of n, s, subagent, "
                             f"got {str(kind)[:20]!r}")
        if kind == "subagent":
            self.subagent(si, d, where)
            return
        ids = _field(d, "hash_ids", where, "ids", required=True)
        prev = self.prev_ids.get(si)
        s = self.sessions[si]
        t = _field(d, "t", where, "seconds")
        s.requests.append(TraceRequest(
            t=float(t if t is not None else (s.requests[-1].t if s.requests else 0.0)),
            in_tokens=_field(d, "in", where, "count", required=True),
            out_tokens=_field(d, "out", where, "count", required=True),
            blocks=len(ids), shared_prev_blocks=common_prefix(ids, prev) if prev else 0,
            implied_hit_tokens=self.scope.observe(ids),       # blocks for now (× size later)
            model=_field(d, "model", where, "text"), stop=_field(d, "stop", where, "text"),
            api_time=_field(d, "api_time", where, "seconds"),
            ttft=_field(d, "ttft", where, "seconds"),
            think_time=_field(d, "think_time", where, "seconds"),
            input_types=tuple(_field(d, "input_types", where, "texts") or ())))
        if s.model is None:
            s.model = s.requests[-1].model
        self.prev_ids[si] = ids

    def subagent(self, parent: int, d: dict[str, Any], where: str) -> None:
        reqs = d.get("requests")
        if not isinstance(reqs, list):
            raise InputError(f"{where}: field 'requests': expected a list of requests")
        start = _field(d, "t", where, "seconds", required=True)
        p = self.sessions[parent]
        name = f"{p.name}.{d.get('agent_id') or len(self.sessions)}"
        si = self.session(name, parent, float(start),
                          _field(d, "tool_tokens", where, "count") or 0,
                          _field(d, "system_tokens", where, "count") or 0, p.block_size)
        for j, r in enumerate(reqs):
            self.request(si, r, f"{where}.{j}")
        if not self.sessions[si].requests:
            raise InputError(f"{where}: field 'requests': a sub-agent with no requests")


def read_trace(path: Path) -> tuple[list[TraceSession], dict[str, Any]]:
    """Sessions of one cc-traces file (the conversation, then its sub-agents) and its
    header fields (id, block_size, hash_id_scope, models)."""
    r = _Reader(path)
    head: dict[str, Any] = {}
    main = -1
    try:
        with path.open(encoding="utf-8") as fh:
            idx = 0
            for key, value in iter_object(fh, "requests"):
                if key != "requests":
                    head[key] = value
                    continue
                if value is ITEMS:
                    bs = _field(head, "block_size", f"{path}", "count") or 64
                    main = r.session(str(head.get("id") or path.stem), None, 0.0,
                                     _field(head, "tool_tokens", f"{path}", "count") or 0,
                                     _field(head, "system_tokens", f"{path}", "count") or 0,
                                     bs)
                    continue
                r.request(main, value, f"{path}: request {idx}")
                idx += 1
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except StreamError as exc:
        raise InputError(f"{path}: not a cc-traces JSON object ({exc})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a cc-traces file") from None
    if main < 0:
        raise InputError(f"{path}: field 'requests': missing (not a cc-traces file)")
    if not r.sessions[main].requests:
        raise InputError(f"{path}: field 'requests': no requests")
    for s in r.sessions:
        if s.block_size == 0:
            raise InputError(f"{path}: field 'block_size': must be positive")
        for q in s.requests:
            q.implied_hit_tokens = hit_tokens(q.implied_hit_tokens, q.blocks, q.in_tokens,
                                              s.block_size)
        if s.prefix_tokens >= s.requests[0].in_tokens:   # the prefix must fit its first call
            s.prefix_tokens = max(0, s.requests[0].in_tokens - 2 * s.block_size)
    return r.sessions, head


def trace_files(paths: list[Path]) -> Iterator[Path]:
    """The files to read: given files, and each folder's *.json (sorted)."""
    for p in paths:
        if p.is_dir():
            yield from sorted(q for q in p.glob("*.json") if q.is_file())
        elif p.exists():
            yield p
        else:
            raise InputError(f"{p}: no such file or folder")
