"""Claude Code session transcripts (JSONL) → recorded calls, with the original text.

Format: `../shared/reference/agent-sessions.md`. One JSON record per line; the
conversation is a uuid tree and the active chain is the path from the last leaf back
to the root, crossing compact boundaries through `logicalParentUuid`. One API
response is written as several assistant lines sharing `message.id`: they are merged
into one call keeping the largest usage. Progress, snapshots, metadata, unknown record
types and records off the active chain are skipped and counted by type.

Malformed lines (not JSON, not an object) are skipped and counted, with the first
locations kept for the summary — Claude Code can leave a torn last line when killed —
unless `strict`, where the first one is an `InputError` naming file and line.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from simulator import tokens
from simulator.errors import InputError
from simulator.scenario import content

_CHAIN_TYPES = ("user", "assistant", "system")
_TOOL_KINDS = {"Read": "read", "Bash": "bash", "Grep": "grep", "Glob": "grep"}
SPAWN_TOOLS = ("Task", "Agent")


@dataclass
class RawBlock:
    kind: str                      # text | tool_use | tool_result | thinking
    text: str = ""
    tool: str | None = None
    id: str | None = None
    is_error: bool = False
    args: dict[str, Any] | None = None
    summary: bool = False


@dataclass
class RawCall:
    msg_id: str
    user: list[RawBlock] = field(default_factory=list)
    assistant: list[RawBlock] = field(default_factory=list)
    usage: dict[str, int] | None = None
    stop_reason: str | None = None
    wait_s: float = 0.0
    wait_kind: str = "none"
    start_ts: float = 0.0
    end_ts: float = 0.0
    compaction: tuple[str, int | None, int] | None = None   # trigger, preTokens, at


@dataclass
class RawSession:
    name: str
    calls: list[RawCall]
    first_ts: float
    sidechain: bool
    first_prompt: str = ""


@dataclass
class Transcript:
    sessions: list[RawSession] = field(default_factory=list)
    files: int = 0
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    malformed: list[str] = field(default_factory=list)


def _ts(rec: dict[str, Any]) -> float | None:
    raw = rec.get("timestamp")
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def read_records(path: Path, out: Transcript, strict: bool) -> list[dict[str, Any]]:
    """The JSON object records of one file; malformed lines counted (or raised)."""
    recs: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read transcript ({exc.strerror})") from None
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            rec, why = None, f"not JSON ({exc.msg})"
        else:
            why = "not a JSON object"
        if not isinstance(rec, dict):
            if strict:
                raise InputError(f"{path}:{no}: malformed transcript line: {why}")
            out.skipped["malformed line"] += 1
            if len(out.malformed) < 5:
                out.malformed.append(f"{path.name}:{no}")
            continue
        recs.append(rec)
    out.records += len(recs)
    return recs


def _chain(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The path from the last leaf (user/assistant/system record) back to the root."""
    by_uuid = {r["uuid"]: r for r in recs if isinstance(r.get("uuid"), str)}
    chain_recs = [r for r in recs if r.get("type") in _CHAIN_TYPES]
    parents = {r.get("parentUuid") for r in chain_recs} | {
        r.get("logicalParentUuid") for r in chain_recs}
    leaf = next((r for r in reversed(recs) if r.get("type") in _CHAIN_TYPES
                 and r.get("uuid") not in parents and isinstance(r.get("uuid"), str)), None)
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node = leaf
    while node is not None and node["uuid"] not in seen:
        seen.add(node["uuid"])
        path.append(node)
        nxt = node.get("parentUuid") or node.get("logicalParentUuid")
        node = by_uuid.get(nxt) if isinstance(nxt, str) else None
    path.reverse()
    return path


def _trees(recs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split records into independent trees (in-file sidechains have their own roots)."""
    root_of: dict[str, str] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        uid = r.get("uuid")
        parent = r.get("parentUuid") or r.get("logicalParentUuid")
        root = root_of.get(parent) if isinstance(parent, str) else None
        root = root or (uid if isinstance(uid, str) else "")
        if isinstance(uid, str):
            root_of[uid] = root
        groups.setdefault(root, []).append(r)
    return list(groups.values())


def _result_text(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(b.get("text", "") for b in c
                         if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _capped(tool: str | None, text: str) -> str:
    """Re-apply Claude Code's tool-output caps (stored outputs can be whole)."""
    ids = tokens.encode(text)
    cap = content.cap_tool_result(_TOOL_KINDS.get(tool or "", "other"), len(ids))
    return text if cap >= len(ids) else tokens.decode(ids[:cap])


def _user_blocks(rec: dict[str, Any], tool_names: dict[str, str]) -> list[RawBlock]:
    msg = rec.get("message") or {}
    c = msg.get("content") if isinstance(msg, dict) else None
    summary = bool(rec.get("isCompactSummary"))
    if isinstance(c, str):
        return [RawBlock("text", c, summary=summary)]
    out: list[RawBlock] = []
    for b in c if isinstance(c, list) else []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            out.append(RawBlock("text", str(b.get("text", "")), summary=summary))
        elif b.get("type") == "tool_result":
            tid = str(b.get("tool_use_id", ""))
            tool = tool_names.get(tid)
            out.append(RawBlock("tool_result", _capped(tool, _result_text(b.get("content"))),
                                tool=tool, id=tid, is_error=bool(b.get("is_error"))))
    return out


def _assistant_blocks(msg: dict[str, Any], tool_names: dict[str, str]) -> list[RawBlock]:
    out: list[RawBlock] = []
    for b in msg.get("content") or []:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            out.append(RawBlock("text", str(b.get("text", ""))))
        elif kind == "thinking":
            out.append(RawBlock("thinking", str(b.get("thinking", ""))))
        elif kind == "tool_use":
            tid, name = str(b.get("id", "")), str(b.get("name", "tool"))
            tool_names[tid] = name
            args = b.get("input") if isinstance(b.get("input"), dict) else {}
            out.append(RawBlock("tool_use", tool=name, id=tid, args=args))
    return out


def _usage(u: Any) -> dict[str, int] | None:
    if not isinstance(u, dict):
        return None
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
            "output_tokens")
    return {k: int(u.get(k) or 0) for k in keys}


class _Builder:
    """Walks one chain and groups it into calls."""

    def __init__(self, out: Transcript) -> None:
        self.out = out
        self.calls: list[RawCall] = []
        self.by_id: dict[str, RawCall] = {}
        self.pending: list[RawBlock] = []
        self.pending_ts: float | None = None
        self.boundary: tuple[str, int] | None = None
        self.boundary_pre: int | None = None
        self.tool_names: dict[str, str] = {}
        self.last_end: float | None = None

    def feed(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "user":
            self.pending.extend(_user_blocks(rec, self.tool_names))
            self.pending_ts = _ts(rec) or self.pending_ts
        elif kind == "assistant":
            self._assistant(rec)
        elif kind == "system" and rec.get("subtype") == "compact_boundary":
            meta = rec.get("compactMetadata") or {}
            pre = meta.get("preTokens") if isinstance(meta, dict) else None
            self.boundary = (str(meta.get("trigger", "auto")) if isinstance(meta, dict)
                             else "auto", len(self.pending))
            self.boundary_pre = int(pre) if isinstance(pre, int | float) else None
        else:
            self.out.skipped[f"{kind} ({rec.get('subtype', '-')})"] += 1

    def _assistant(self, rec: dict[str, Any]) -> None:
        msg = rec.get("message") or {}
        if not isinstance(msg, dict) or msg.get("model") == "<synthetic>":
            self.out.skipped["assistant (synthetic)"] += 1
            return
        mid = str(msg.get("id") or rec.get("requestId") or rec.get("uuid"))
        ts = _ts(rec) or self.last_end or 0.0
        call = self.by_id.get(mid)
        if call is None:   # (tool results interleaved with a response's lines stay
            call = self._new_call(mid, ts)   # pending for the next call)
        call.assistant.extend(_assistant_blocks(msg, self.tool_names))
        u = _usage(msg.get("usage"))
        if u is not None and (call.usage is None or u["output_tokens"] >= call.usage["output_tokens"]):
            call.usage = u
        call.stop_reason = msg.get("stop_reason") or call.stop_reason
        call.end_ts = max(call.end_ts, ts)
        self.last_end = call.end_ts

    def _new_call(self, mid: str, ts: float) -> RawCall:
        start = self.pending_ts if self.pending else (self.last_end or ts)
        start = start if start is not None else ts
        has_result = any(b.kind == "tool_result" for b in self.pending)
        call = RawCall(mid, user=self.pending, start_ts=start, end_ts=ts,
                       wait_kind="tool" if has_result else ("think" if self.pending else "none"))
        if self.last_end is not None:
            call.wait_s = max(0.0, start - self.last_end)
        if self.boundary is not None:
            call.compaction = (self.boundary[0], self.boundary_pre, self.boundary[1])
            self.boundary = None
        self.pending, self.pending_ts = [], None
        self.calls.append(call)
        self.by_id[mid] = call
        return call


def _session(name: str, recs: list[dict[str, Any]], sidechain: bool,
             out: Transcript) -> RawSession | None:
    chain = _chain(recs)
    used = {id(r) for r in chain}
    for r in recs:
        if id(r) not in used:
            t = r.get("type")
            out.skipped[f"{t} (off active chain)" if t in _CHAIN_TYPES else str(t)] += 1
    b = _Builder(out)
    for r in chain:
        b.feed(r)
    if not b.calls:
        for r in chain:
            out.skipped[f"{r.get('type')} (no reply)"] += 1
        return None
    first = next((t for t in (_ts(r) for r in chain) if t is not None), 0.0)
    prompt = next((x.text for x in b.calls[0].user if x.kind == "text"), "")
    return RawSession(name, b.calls, first, sidechain, prompt)


def transcript_files(paths: list[Path]) -> list[tuple[Path, bool]]:
    """(file, is_subagent) for files and project folders (`*.jsonl` and
    `*/subagents/agent-*.jsonl`)."""
    out: list[tuple[Path, bool]] = []
    for p in paths:
        if p.is_dir():
            out += [(f, False) for f in sorted(p.glob("*.jsonl"))]
            out += [(f, True) for f in sorted(p.glob("*/subagents/agent-*.jsonl"))]
        elif p.is_file():
            out.append((p, p.parent.name == "subagents"))
        else:
            raise InputError(f"{p}: no such transcript file or folder")
    if not out:
        raise InputError(f"no *.jsonl transcripts under {', '.join(map(str, paths))}")
    return out


def parse_transcripts(paths: list[Path], *, strict: bool = False) -> Transcript:
    """Read transcripts into sessions of calls (original text kept, in memory only)."""
    out = Transcript()
    for path, is_sub in transcript_files(paths):
        out.files += 1
        recs = read_records(path, out, strict)
        trees = _trees(recs) if not is_sub else [recs]
        for i, tree in enumerate(trees):
            side = is_sub or all(r.get("isSidechain") for r in tree if r.get("type") in _CHAIN_TYPES)
            sess = _session(f"{path.stem}#{i}", tree, side, out)
            if sess is not None:
                out.sessions.append(sess)
    if not out.sessions:
        raise InputError(f"no assistant calls with usage found in {out.files} transcript file(s)")
    return out
