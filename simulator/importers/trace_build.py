"""Block-hash traces (cc-traces, Mooncake) → the replay script of a scenario.

A block-hash trace has no text: per request the input and output sizes, timings and
the chained hash ids of its prompt blocks. Requests whose hash ids agree on the
first L blocks shared those L·block_size tokens. The replay rebuilds each session as
a growing conversation whose sizes are the recorded ones:

* growth (the request keeps at least half of the previous one's blocks and is not
  smaller): the previous reply (at most its recorded output) and one user message
  make up the difference, so the new request re-sends the old one as its prefix —
  the server sees the sharing the hash ids imply;
* a drop (fewer than half the blocks kept, or a smaller context): a recorded
  compaction point. The new history keeps the leading whole messages that fit in
  the shared blocks (`keep_messages`) and one user message brings the size back to
  the recorded one. Its inferred kind: `summarize` (nothing but the prefix kept,
  smaller), `clear_tool_results` (a head kept, smaller: the middle was cleared),
  `restart` / `rewrite` (nothing / a head kept, not smaller).

Sizes are tokens; framing (4 per message, 3 per block, `protocol.messages`) is taken
out of the text so the replayed prompt has the recorded size.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from simulator.protocol.messages import BLOCK_OVERHEAD_TOKENS, MESSAGE_OVERHEAD_TOKENS
from simulator.scenario.replay import format_spans
from simulator.util.jsontypes import JSONObject, JSONValue
from simulator.util.numbers import to_int

SPAN_MAX_TOKENS = 4096          # a block's text is cut into spans of at most this size
DROP_KEEP_SHARE = 0.5           # cc-traces: a "major reset" keeps < 50% of the blocks
NEW_TURN_TOKENS = 64            # a drop's own user addition (the rest is the rebuilt history)
TOOL_USE_TOKENS = 12            # a synthetic Task call (name, id, empty input)
_MSG = MESSAGE_OVERHEAD_TOKENS
_BLK = BLOCK_OVERHEAD_TOKENS


@dataclass
class TraceRequest:
    """One recorded request, reduced to what the replay needs (hash ids are not kept:
    only how many leading blocks it shares with the session's previous request and
    how many it shares with anything seen before in its scope)."""

    t: float                     # s since the session began
    in_tokens: int
    out_tokens: int
    blocks: int                  # len(hash_ids)
    shared_prev_blocks: int      # leading ids equal to the previous request's (session)
    implied_hit_tokens: int      # leading ids seen before in the scope × block size (≤ in)
    model: str | None = None
    stop: str | None = None
    api_time: float | None = None
    ttft: float | None = None
    think_time: float | None = None
    input_types: tuple[str, ...] = ()
    # A session's first request in a file whose ids are global (Mooncake): its hash ids,
    # so sessions that share leading blocks are given the same text for them.
    block_ids: tuple[Hashable, ...] | None = None
    cache_write_tokens: int = 0  # recorded cache creation (telemetry; a hash trace: 0)


@dataclass
class TraceSession:
    name: str
    block_size: int
    prefix_tokens: int                       # tools + system (0 when the format lacks it)
    tool_tokens: int = 0
    system_tokens: int = 0
    requests: list[TraceRequest] = field(default_factory=list)
    parent: int | None = None                # index of the parent session (sub-agents)
    start_s: float = 0.0                     # sub-agent: since the parent began; else since
    #                                          the trace began
    model: str | None = None
    source: str = ""                         # the file it came from
    arrivals: bool = False                   # each call carries its recorded start (at_s)
    message_tokens: int = _MSG               # a message's framing the replay plans for


class HashScope:
    """Prefix matching over chained hash ids: an id stands for its whole prefix, so the
    tokens a perfect prefix cache would hit are the leading ids already seen."""

    def __init__(self) -> None:
        self.seen: set[Hashable] = set()

    def observe(self, ids: Sequence[Hashable]) -> int:
        n = 0
        for h in ids:
            if h not in self.seen:
                break
            n += 1
        self.seen.update(ids)
        return n


def hit_tokens(matched: int, blocks: int, in_tokens: int, block_size: int) -> int:
    """Tokens the `matched` leading blocks stand for. In a trace whose blocks cover its
    `in` (cc-traces: full blocks only; Mooncake: a partial tail too) that is
    matched × block size. A trace whose ids were hashed over another tokenisation
    than `in` counts (endurance's export: client cl100k blocks, server prompt
    sizes) gets the matched share of `in`, so its implied share stays a share."""
    if blocks * block_size >= in_tokens - block_size:
        return min(in_tokens, matched * block_size)
    return round(in_tokens * matched / blocks) if blocks else 0


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class SpanTable:
    """Span ids and sizes: every block of text gets fresh spans (distinct synthetic
    text), so only what the conversation re-sends is shared."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self._blocks: dict[Hashable, int] = {}

    def blocks(self, ids: Sequence[Hashable], block_size: int, total: int) -> str:
        """Spans of `total` tokens, one per hash id: an id seen before gets the same
        span (so the same text), a full block is `block_size` − 1 tokens (the joining
        newline is the last), the final span takes what is left."""
        out: list[int] = []
        left = total
        for j, h in enumerate(ids):
            last = j == len(ids) - 1
            sid = self._blocks.get(h)
            if sid is None:
                if left <= 0:
                    break
                n = min(left, block_size - 1) if not last else left
                sid = len(self.tokens)
                self.tokens.append(n)
                self._blocks[h] = sid
            out.append(sid)
            left -= self.tokens[sid] + 1
        if left > 1:                                   # a reused last block left a gap
            out.append(len(self.tokens))
            self.tokens.append(left - 1)
        return format_spans(out) if out else self.new(total)

    def new(self, n: int) -> str:
        first = len(self.tokens)
        while n > 0:
            take = min(SPAN_MAX_TOKENS, n)
            self.tokens.append(take)
            n -= take
        last = len(self.tokens) - 1
        if last < first:               # an empty text still needs one (empty) span
            self.tokens.append(0)
            return str(first)
        return str(first) if first == last else f"{first}-{last}"


def _text(spans: SpanTable, n: int, *, summary: bool = False) -> JSONObject:
    n = max(1, n)
    d: JSONObject = {"kind": "text", "tokens": n, "spans": spans.new(n)}
    if summary:
        d["summary"] = True
    return d


def _msg_tokens(blocks: Iterable[JSONObject], msg: int = _MSG) -> int:
    return msg + sum(_BLK + to_int(b["tokens"]) for b in blocks)


def drop_kind(kept_history: bool, shrank: bool) -> str:
    if shrank:
        return "clear_tool_results" if kept_history else "summarize"
    return "rewrite" if kept_history else "restart"


def _wait(req: TraceRequest, prev: TraceRequest | None) -> tuple[float, str]:
    kind = "tool" if "tool_result" in req.input_types else "think"
    if req.think_time is not None:
        return max(0.0, req.think_time), kind
    if prev is None:
        return 0.0, "none"
    gap = req.t - prev.t - (prev.api_time or 0.0)
    return max(0.0, gap), kind


def session_calls(s: TraceSession, spans: SpanTable, spawn_at: dict[int, list[int]],
                  drops: dict[str, int]) -> list[JSONObject]:
    """The replay calls of one session (see the module docstring). `spawn_at`: call
    index → sub-agent sessions it starts (a Task call in its reply, answered by a
    tool_result in the next call, so the parent waits for them as recorded tools do)."""
    calls: list[JSONObject] = []
    history: list[tuple[str, int]] = []          # (role, tokens) of the replayed history
    prev: TraceRequest | None = None
    p = s.prefix_tokens
    msg = s.message_tokens
    for k, r in enumerate(s.requests):
        compaction: JSONObject | None = None
        task_id = f"toolu_{s.name}_{k - 1}" if (k - 1) in spawn_at else None
        if prev is not None:
            # The previous reply: its size is settled now that this request's is known.
            pc = calls[-1]
            delta = r.in_tokens - prev.in_tokens
            kept = r.shared_prev_blocks * s.block_size
            drop = r.shared_prev_blocks < DROP_KEEP_SHARE * prev.blocks or delta < 0
            overhead = 2 * msg + 2 * _BLK + (2 * _BLK + TOOL_USE_TOKENS if task_id else 0)
            a = prev.out_tokens if drop else min(prev.out_tokens, max(1, delta - overhead - 1))
            reply = [_text(spans, a)]
            if task_id is not None:
                reply.append({"kind": "tool_use", "tokens": TOOL_USE_TOKENS, "tool": "Task",
                              "id": task_id})
            pc["assistant"] = list[JSONValue](reply)
            history.append(("assistant", _msg_tokens(reply, msg)))
            if not drop:
                u = max(1, delta - overhead - a)
                user = [_user_block(spans, u, task_id)]
            else:
                m, total = 0, p
                for i, (_, n) in enumerate(history):
                    if total + n > kept:
                        break
                    total += n
                    m = i + 1
                m -= m % 2                               # end on a reply: roles alternate
                total = p + sum(n for _, n in history[:m])
                rest = r.in_tokens - total - msg
                own = min(NEW_TURN_TOKENS, max(1, rest // 2))
                body = max(1, rest - own - 2 * _BLK)
                user = [_user_block(spans, own, task_id), _text(spans, body, summary=True)]
                kind = drop_kind(m > 0, delta < 0)
                drops[kind] = drops.get(kind, 0) + 1
                compaction = {"trigger": "auto", "pre_tokens": prev.in_tokens, "at": 0,
                              "keep_messages": m, "inferred": kind}
                history = history[:m]
        elif r.block_ids is not None:
            n = max(1, r.in_tokens - p - msg - _BLK)
            skip = p // s.block_size
            user = [{"kind": "text", "tokens": n,
                     "spans": spans.blocks(r.block_ids[skip:], s.block_size, n)}]
        else:
            user = [_text(spans, r.in_tokens - p - msg - _BLK)]
        call: JSONObject = {"user": list[JSONValue](user)}
        if compaction is not None:
            call["compaction"] = compaction
        history.append(("user", _msg_tokens(user, msg)))
        wait, wait_kind = _wait(r, prev)
        call.update(stop_reason=r.stop or None, wait_s=round(wait, 3), wait_kind=wait_kind,
                    usage={"input_tokens": r.in_tokens - r.implied_hit_tokens
                           - r.cache_write_tokens,
                           "cache_read_tokens": r.implied_hit_tokens,
                           "cache_creation_tokens": r.cache_write_tokens,
                           "output_tokens": r.out_tokens})
        if s.arrivals:
            call["at_s"] = round(r.t, 3)
        if r.api_time is not None:
            call["model_s"] = round(max(0.0, r.api_time), 3)
        if r.model:
            call["model"] = r.model
        if k in spawn_at:
            call["spawns"] = list[JSONValue](spawn_at[k])
        calls.append(call)
        prev = r
    if calls:
        last = s.requests[-1]
        reply = [_text(spans, last.out_tokens)]
        if (len(calls) - 1) in spawn_at:
            reply.append({"kind": "tool_use", "tokens": TOOL_USE_TOKENS, "tool": "Task",
                          "id": f"toolu_{s.name}_{len(calls) - 1}"})
        calls[-1]["assistant"] = list[JSONValue](reply)
    return calls


def _user_block(spans: SpanTable, n: int, task_id: str | None) -> JSONObject:
    if task_id is None:
        return _text(spans, n)
    return {"kind": "tool_result", "tokens": max(1, n - 6), "spans": spans.new(max(1, n - 6)),
            "tool": "Task", "id": task_id}


def spawn_points(sessions: Sequence[TraceSession]) -> dict[int, dict[int, list[int]]]:
    """parent session → call index → sub-agent sessions: a sub-agent starts after the
    parent's last request that began at or before its recorded start."""
    out: dict[int, dict[int, list[int]]] = {}
    for i, s in enumerate(sessions):
        if s.parent is None:
            continue
        reqs = sessions[s.parent].requests
        k = max((j for j, r in enumerate(reqs) if r.t <= s.start_s), default=0)
        out.setdefault(s.parent, {}).setdefault(k, []).append(i)
    return out


def replay_sessions(sessions: Sequence[TraceSession], base_prefix: int | None,
                    spans: SpanTable, drops: dict[str, int]) -> list[JSONObject]:
    """`base_prefix`: the run's shared system+tools size; a session with another
    prefix (or every session when None: nothing shared across sessions) gets its own."""
    spawns = spawn_points(sessions)
    out: list[JSONObject] = []
    for i, s in enumerate(sessions):
        d: JSONObject = {"id": s.name, "calls": list[JSONValue](
            session_calls(s, spans, spawns.get(i, {}), drops))}
        if s.parent is not None:
            pk = max((k for k, v in spawns.get(s.parent, {}).items() if i in v), default=0)
            d.update(parent=s.parent, parent_call=pk)
        if s.start_s > 0:
            d["start_offset_s"] = round(s.start_s, 3)
        if base_prefix is None or s.prefix_tokens != base_prefix:
            d["prefix_tokens"] = s.prefix_tokens
        out.append(d)
    return out


def implied_share(sessions: Sequence[TraceSession]) -> float | None:
    """Share of all input tokens a perfect prefix cache hits, by the hash ids."""
    total = sum(r.in_tokens for s in sessions for r in s.requests)
    hit = sum(r.implied_hit_tokens for s in sessions for r in s.requests)
    return hit / total if total else None
