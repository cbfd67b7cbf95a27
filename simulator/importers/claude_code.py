"""Claude Code session transcripts (JSONL) → recorded calls, with the original text.

Format: Claude Code's session JSONL (~/.claude/projects/). One JSON record per line; the
conversation is a uuid tree. The active chain is the path from the last leaf back to
the root, crossing compact boundaries through `logicalParentUuid`; parallel tool calls
make the tree branch, so the records kept are the active chain *plus* every line that
shares `message.id` with a response on it and every tool_result answering one of its
tool_use blocks — replayed in file order, which is the order Claude Code sent them.
One API response is written as several assistant lines sharing `message.id`: they are
merged into one call keeping the largest usage. Older versions wrote a compaction as a
new root segment whose first user message is the summary: it continues the previous
segment as a compaction, not a new session. Progress, snapshots, metadata and unknown
record types are skipped and counted by type; conversation records still left out
(abandoned branches, orphan tool results) are counted as *dropped*.

Malformed lines (not JSON, not an object) are skipped and counted, with the first
locations kept for the summary — Claude Code can leave a torn last line when killed —
unless `strict`, where the first one is an `InputError` naming file and line.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from simulator.errors import InputError
from simulator.scenario import content
from simulator.util import tokens
from simulator.util.numbers import finite_float, is_number

_CHAIN_TYPES = ("user", "assistant", "system")
_KNOWN_TYPES = (*_CHAIN_TYPES, "summary", "progress", "file-history-snapshot", "attachment",
                "queue-operation")
_OLD_SUMMARY = "This session is being continued from a previous conversation"
_TOOL_KINDS = {"Read": "read", "Bash": "bash", "Grep": "grep", "Glob": "grep"}
SPAWN_TOOLS = ("Task", "Agent")


@dataclass
class RawBlock:
    kind: str                      # text | tool_use | tool_result | thinking
    text: str = ""
    tool: str | None = None
    id: str | None = None
    is_error: bool = False
    args: dict[str, object] | None = None
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
    dropped: Counter[str] = field(default_factory=Counter)   # conversation records left out
    found_calls: int = 0        # distinct message ids of real (non-synthetic) responses
    compactions_found: int = 0  # boundaries + summary-led segments seen


LINE = "__line__"     # private keys added to each record: its file and line number
FILE = "__file__"

Record = dict[str, object]      # one transcript line as parsed (plus FILE and LINE)


def where(rec: Record) -> str:
    return f"{rec.get(FILE, '?')}:{rec.get(LINE, '?')}"


def _ts(rec: Record) -> float | None:
    """The record's time (s since the epoch); None when it has none; an unreadable one
    is bad input."""
    raw = rec.get("timestamp")
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if t.tzinfo is None:
                t = t.replace(tzinfo=UTC)
            return t.timestamp()
    raise InputError(f"{where(rec)}: timestamp: expected an ISO 8601 time such as "
                     f"2025-06-02T09:00:00.000Z, got {str(raw)[:40]!r}")


def read_records(path: Path, out: Transcript, strict: bool) -> list[Record]:
    """The JSON object records of one file; malformed lines counted (or raised)."""
    recs: list[Record] = []
    try:   # utf-8-sig: a leading byte-order mark is not part of record 1
        lines = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read transcript ({exc.strerror})") from None
    if not any(line.strip() for line in lines):
        raise InputError(f"{path}: empty file: expected a Claude Code transcript "
                         "(JSON lines, one record per line)")
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
        rec[FILE], rec[LINE] = str(path), no
        recs.append(rec)
    if recs and not any(r.get("type") in _KNOWN_TYPES for r in recs):
        raise InputError(f"{path}:{recs[0][LINE]}: not a Claude Code transcript: expected "
                         "records with a 'type' of user, assistant, system, summary or progress")
    out.records += len(recs)
    return recs


def _chain(recs: list[Record]) -> list[Record]:
    """The path from the last leaf (user/assistant/system record) back to the root."""
    by_uuid = {u: r for r in recs if isinstance(u := r.get("uuid"), str)}
    chain_recs = [r for r in recs if r.get("type") in _CHAIN_TYPES]
    parents = {r.get("parentUuid") for r in chain_recs} | {
        r.get("logicalParentUuid") for r in chain_recs}
    leaf = next((r for r in reversed(recs) if r.get("type") in _CHAIN_TYPES
                 and r.get("uuid") not in parents and isinstance(r.get("uuid"), str)), None)
    path: list[Record] = []
    seen: set[str] = set()
    node = leaf
    while node is not None and isinstance(uid := node["uuid"], str) and uid not in seen:
        seen.add(uid)
        path.append(node)
        nxt = node.get("parentUuid") or node.get("logicalParentUuid")
        node = by_uuid.get(nxt) if isinstance(nxt, str) else None
    path.reverse()
    return path


def _trees(recs: list[Record]) -> list[list[Record]]:
    """Split records into independent trees (in-file sidechains have their own roots)."""
    root_of: dict[str, str] = {}
    groups: dict[str, list[Record]] = {}
    for r in recs:
        uid = r.get("uuid")
        parent = r.get("parentUuid") or r.get("logicalParentUuid")
        root = root_of.get(parent) if isinstance(parent, str) else None
        root = root or (uid if isinstance(uid, str) else "")
        if isinstance(uid, str):
            root_of[uid] = root
        groups.setdefault(root, []).append(r)
    return list(groups.values())


def _result_text(c: object) -> str:
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


def _user_blocks(rec: Record, tool_names: dict[str, str]) -> list[RawBlock]:
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


def _assistant_blocks(msg: dict[str, object], tool_names: dict[str, str]) -> list[RawBlock]:
    out: list[RawBlock] = []
    c = msg.get("content")
    for b in c if isinstance(c, list) else []:
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


_USAGE_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
               "output_tokens")


def _usage(u: object, rec: Record) -> dict[str, int] | None:
    """The four token counts; absent ones are 0; anything but a non-negative integer is
    bad input (one line naming file and line)."""
    if u is None:
        return None
    if not isinstance(u, dict):
        raise InputError(f"{where(rec)}: message.usage: expected an object of token counts, "
                         f"got {type(u).__name__}")
    out: dict[str, int] = {}
    for k in _USAGE_KEYS:
        v = u.get(k)
        if v is None:
            out[k] = 0
            continue
        n = finite_float(v)
        if n is None or n < 0 or n != int(n):
            raise InputError(f"{where(rec)}: message.usage.{k}: expected a non-negative "
                             f"integer, got {json.dumps(v)[:40]}")
        out[k] = int(v)          # exact: v is a whole number
    return out


def prompt_tokens(u: dict[str, int]) -> int:
    """Recorded prompt size: input + cache read + cache creation."""
    return u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]


def _mid(rec: Record) -> str:
    msg = rec.get("message")
    mid = msg.get("id") if isinstance(msg, dict) else None
    return str(mid or rec.get("requestId") or rec.get("uuid"))


def _synthetic(rec: Record) -> bool:
    msg = rec.get("message")
    return not isinstance(msg, dict) or msg.get("model") == "<synthetic>"


def _blocks(rec: Record) -> list[dict[str, object]]:
    msg = rec.get("message")
    c = msg.get("content") if isinstance(msg, dict) else None
    return [b for b in c if isinstance(b, dict)] if isinstance(c, list) else []


class _Builder:
    """Walks the kept records of one session (one or more segments) and groups them
    into calls."""

    def __init__(self, out: Transcript) -> None:
        self.out = out
        self.calls: list[RawCall] = []
        self.by_id: dict[str, RawCall] = {}
        self.pending: list[RawBlock] = []
        self.pending_ts: float | None = None
        self.boundary: tuple[str, int] | None = None
        self.boundary_pre: int | None = None
        self.tool_names: dict[str, str] = {}
        self.tool_order: dict[str, int] = {}
        self.last_end: float | None = None
        self.first_ts: float | None = None

    def feed(self, rec: Record) -> None:
        kind = rec.get("type")
        ts = _ts(rec)
        if ts is not None and kind in _CHAIN_TYPES and self.first_ts is None:
            self.first_ts = ts
        if kind == "user":
            self.pending.extend(_user_blocks(rec, self.tool_names))
            self.pending_ts = ts or self.pending_ts
        elif kind == "assistant":
            self._assistant(rec, ts)
        elif kind == "system" and rec.get("subtype") == "compact_boundary":
            got = rec.get("compactMetadata")
            meta = got if isinstance(got, dict) else {}
            pre = meta.get("preTokens")
            self.mark_compaction(str(meta.get("trigger", "auto")),
                                 int(pre) if is_number(pre) and finite_float(pre) is not None
                                 else None)
        else:
            self.out.skipped[f"{kind} ({rec.get('subtype', '-')})" if kind == "system"
                             else str(kind)] += 1

    def mark_compaction(self, trigger: str, pre: int | None) -> None:
        """History is replaced from here on (blocks pending now were compacted away)."""
        self.out.compactions_found += 1
        if pre is None and self.calls and self.calls[-1].usage is not None:
            pre = prompt_tokens(self.calls[-1].usage)
        self.boundary, self.boundary_pre = (trigger, len(self.pending)), pre

    def _assistant(self, rec: Record, ts: float | None) -> None:
        msg = rec.get("message")
        if _synthetic(rec) or not isinstance(msg, dict):      # (_synthetic: not an object)
            self.out.skipped["assistant (synthetic)"] += 1
            return
        mid = _mid(rec)
        ts = ts or self.last_end or 0.0
        call = self.by_id.get(mid)
        if call is None:   # (tool results interleaved with a response's lines stay
            call = self._new_call(mid, ts)   # pending for the next call)
        blocks = _assistant_blocks(msg, self.tool_names)
        for b in blocks:
            if b.kind == "tool_use" and b.id is not None:
                self.tool_order.setdefault(b.id, len(self.tool_order))
        call.assistant.extend(blocks)
        u = _usage(msg.get("usage"), rec)
        if u is not None and (call.usage is None or u["output_tokens"] >= call.usage["output_tokens"]):
            call.usage = u
        call.stop_reason = msg.get("stop_reason") or call.stop_reason
        call.end_ts = max(call.end_ts, ts)
        self.last_end = call.end_ts

    def _take_pending(self) -> list[RawBlock]:
        """The pending user blocks, tool results put in the order of their tool_use
        blocks (parallel results are written as they finish) and orphans dropped."""
        prev = {b.id for b in self.calls[-1].assistant if b.kind == "tool_use"} \
            if self.calls else set()
        blocks: list[RawBlock] = []
        for i, b in enumerate(self.pending):
            if b.kind == "tool_result" and b.id not in prev:
                self.out.dropped["tool_result without its tool_use"] += 1
                if self.boundary is not None and i < self.boundary[1]:
                    self.boundary = (self.boundary[0], self.boundary[1] - 1)
                continue
            blocks.append(b)
        slots = [i for i, b in enumerate(blocks) if b.kind == "tool_result"]
        ordered = sorted((blocks[i] for i in slots),
                         key=lambda b: self.tool_order.get(b.id or "", 0))
        for i, b in zip(slots, ordered, strict=True):
            blocks[i] = b
        return blocks

    def _new_call(self, mid: str, ts: float) -> RawCall:
        start = self.pending_ts if self.pending else (self.last_end or ts)
        start = start if start is not None else ts
        user = self._take_pending()
        has_result = any(b.kind == "tool_result" for b in user)
        call = RawCall(mid, user=user, start_ts=start, end_ts=ts,
                       wait_kind="tool" if has_result else ("think" if user else "none"))
        if self.last_end is not None:
            call.wait_s = max(0.0, start - self.last_end)
        if self.boundary is not None:
            call.compaction = (self.boundary[0], self.boundary_pre, self.boundary[1])
            self.boundary = None
        self.pending, self.pending_ts = [], None
        self.calls.append(call)
        self.by_id[mid] = call
        return call

    def session(self, name: str, sidechain: bool) -> RawSession | None:
        if not self.calls:
            return None
        for c in self.calls:   # a file that starts with a summary (a resumed session):
            if c.compaction is not None:   # it is the first context, not a compaction
                break
            for b in c.user:
                b.summary = False
        prompt = next((x.text for x in self.calls[0].user if x.kind == "text"), "")
        first = self.first_ts if self.first_ts is not None else self.calls[0].start_ts
        return RawSession(name, self.calls, first, sidechain, prompt)


def _kept(recs: list[Record], out: Transcript) -> list[Record]:
    """The active chain plus the parallel branches that belong to it (same response,
    or results answering its tool calls), in file order; the rest is counted."""
    chain = _chain(recs)
    keep = {id(r) for r in chain}
    mids = {_mid(r) for r in chain if r.get("type") == "assistant"}
    for r in recs:
        if r.get("type") == "assistant" and _mid(r) in mids:
            keep.add(id(r))
    uses = {str(b.get("id")) for r in recs if id(r) in keep and r.get("type") == "assistant"
            for b in _blocks(r) if b.get("type") == "tool_use"}
    for r in recs:
        if id(r) in keep or r.get("type") != "user":
            continue
        res = [b for b in _blocks(r) if b.get("type") == "tool_result"]
        if res and all(str(b.get("tool_use_id")) in uses for b in res):
            keep.add(id(r))
    for r in recs:
        if id(r) in keep:
            continue
        t = r.get("type")
        if t in ("user", "assistant") and not (t == "assistant" and _synthetic(r)):
            out.dropped[f"{t} (off active chain)"] += 1
        else:
            out.skipped[f"{t} (off active chain)" if t in _CHAIN_TYPES else str(t)] += 1
    return [r for r in recs if id(r) in keep]


def _segment_start(tree: list[Record]) -> str | None:
    """How a tree continues an earlier segment: 'boundary' (starts with a
    compact_boundary), 'summary' (older format: starts with the summary), else None."""
    first = next((r for r in tree if r.get("type") in _CHAIN_TYPES), None)
    if first is None:
        return None
    if first.get("type") == "system" and first.get("subtype") == "compact_boundary":
        return "boundary"
    if first.get("type") == "user":
        msg = first.get("message")
        c = msg.get("content") if isinstance(msg, dict) else None
        text = c if isinstance(c, str) else next(
            (str(b.get("text", "")) for b in c if isinstance(b, dict) and b.get("type") == "text"),
            "") if isinstance(c, list) else ""
        if first.get("isCompactSummary") or text.startswith(_OLD_SUMMARY):
            return "summary"
    return None


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
        raise InputError(f"no *.jsonl transcripts under {', '.join(map(str, paths))}: expected "
                         "Claude Code session files (~/.claude/projects/<project>/<session>.jsonl)")
    return out


def parse_transcripts(paths: list[Path], *, strict: bool = False) -> Transcript:
    """Read transcripts into sessions of calls (original text kept, in memory only)."""
    out = Transcript()
    files = transcript_files(paths)
    for path, is_sub in files:
        out.files += 1
        recs = read_records(path, out, strict)
        out.found_calls += len({_mid(r) for r in recs
                                if r.get("type") == "assistant" and not _synthetic(r)})
        trees = _trees(recs) if not is_sub else [recs]
        segs: list[tuple[str, _Builder, bool]] = []
        main: _Builder | None = None
        for i, tree in enumerate(trees):
            side = is_sub or all(r.get("isSidechain") for r in tree if r.get("type") in _CHAIN_TYPES)
            start = _segment_start(tree)
            b = main if not side and start is not None and main is not None else None
            if b is None:
                b = _Builder(out)
                segs.append((f"{path.stem}#{i}", b, side))
                if not side:
                    main = b
            elif start == "summary":    # older format: a new root led by the summary
                b.mark_compaction("auto", None)
            for r in _kept(tree, out):
                b.feed(r)
        for name, b, side in segs:
            sess = b.session(name, side)
            if sess is not None:
                out.sessions.append(sess)
    if not out.sessions:
        where_ = str(files[0][0]) if len(files) == 1 else f"{len(files)} transcript files"
        raise InputError(f"{where_}: no assistant responses found: expected Claude Code records "
                         "with type 'assistant' and a message")
    return out
