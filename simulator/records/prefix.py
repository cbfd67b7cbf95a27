"""Client-side reusable prefix: what a perfect prefix cache could reuse.

For each request, the longest prefix (in estimated tokens, over tools → system →
messages) it shares with any earlier request of the run. Requests are compared as
chains of segments (tools, system, each message) by content digest; within the
first segment that differs, the common leading text is counted too.

Histories only grow or get compacted, so within a session the best earlier match is
the session's previous request; across sessions only the head (tools, system, first
message) can be shared. The tracker therefore keeps, per session, the previous
request's segments, plus a run-wide set of head chains: memory stays flat however
long the run.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeVar

from simulator.protocol.messages import Message, Prefix, TextBlock, ToolResultBlock
from simulator.util import tokens

HEAD_SEGMENTS = 3  # tools, system, first message
MAX_HEADS = 16_384  # run-wide head chains remembered (LRU); ≥ 3 per distinct session head
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class _Seg:
    digest: str
    tokens_est: int
    message: Message | None = None
    text: str | None = None

    def serialized(self) -> str:
        return self.message.serialize() if self.message is not None else (self.text or "")


def common_prefix_len(a: str, b: str) -> int:
    """Length of the common leading substring, by binary search over C-speed slice
    comparisons (a char-by-char Python loop is too slow for 100 kB messages)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@lru_cache(maxsize=1 << 16)
def _chain(prev: str, digest: str) -> str:
    """Chain hash of a segment after `prev` (memoised: a session re-sends its whole
    history every turn, so all but the newest links repeat)."""
    return hashlib.blake2b(f"{prev}|{digest}".encode(), digest_size=12).hexdigest()


def _pieces(message: Message) -> list[str]:
    """`message.serialize()` as the pieces it joins, each block's text a piece of its
    own (the very string the block holds)."""
    out = [f"<{message.role}>"]
    for b in message.blocks:
        if isinstance(b, TextBlock):
            out.append(b.text)
        elif isinstance(b, ToolResultBlock):
            out += [f"<tool_result id={b.tool_use_id} error={int(b.is_error)}>", b.content]
        else:
            out.append(b.serialize())
    return out


def _cut(pieces: list[str], n: int) -> list[str]:
    """The pieces of the first n characters of their join (a piece cut short is a new
    string: its ids are not known)."""
    out: list[str] = []
    for p in pieces:
        if n <= 0:
            break
        out.append(p if len(p) <= n else p[:n])
        n -= len(p)
    return out


def _segments(prefix: Prefix, messages: tuple[Message, ...], tools_text: str,
              start: int = 0) -> list[_Seg]:
    """The request's segments from the `start`-th (tools, system, then each message)."""
    segs = [_Seg(prefix.tools_digest, prefix.tools_tokens_est, text=tools_text),
            _Seg(prefix.system_digest, prefix.system_tokens_est, text=prefix.system)][start:]
    segs.extend(_Seg(m.digest, m.tokens_est, message=m)
                for m in messages[max(0, start - 2):])
    return segs


def _same_start(prev: list[_Seg], prefix: Prefix, messages: tuple[Message, ...]) -> int:
    """How many segments (tools, system, messages) start both `prev` and this request
    with the same digests."""
    digests = (prefix.tools_digest, prefix.system_digest)
    k = 0
    limit = min(len(prev), len(messages) + 2)
    while k < 2 and k < limit and prev[k].digest == digests[k]:
        k += 1
    if k < 2:
        return k
    while k < limit and prev[k].digest == messages[k - 2].digest:
        k += 1
    return k


def _estimate(prefix: Prefix, messages: tuple[Message, ...], i: int) -> int:
    """Segment i's token estimate (the request's own, as `_segments` takes it)."""
    if i >= 2:
        return messages[i - 2].tokens_est
    return prefix.tools_tokens_est if i == 0 else prefix.system_tokens_est


def _remember(lru: OrderedDict[K, V], key: K, value: V, limit: int) -> V:
    """`setdefault` on a bounded LRU: keeps the first value, refreshes its recency."""
    if key in lru:
        lru.move_to_end(key)
        return lru[key]
    lru[key] = value
    if len(lru) > limit:
        lru.popitem(last=False)
    return value


def _shared_tokens(seg: _Seg, other: _Seg) -> int:
    """Tokens of the text `seg` shares at its start with `other`, minus the last
    (which may straddle the cut)."""
    a, b = seg.serialized(), other.serialized()
    n = common_prefix_len(a, b)
    if n == 0:
        return 0
    # a message's texts whose ids are known are encoded at their ends only
    shared = _cut(_pieces(seg.message), n) if seg.message is not None else [a[:n]]
    return max(0, len(tokens.encode_pieces(shared)) - 1)


# The shared tokens of two messages, by their digests (a message's digest is its
# serialised text's, as the chains' are): the runs of one process (a search's probes)
# replay the same sessions, whose requests differ from their previous ones alike turn
# by turn. An LRU of MAX_PARTIALS pairs (≈ 200 bytes each).
MAX_PARTIALS = 65_536
_partials: OrderedDict[tuple[str, str], int] = OrderedDict()


@dataclass
class _SessionState:
    chains: list[str] = field(default_factory=list)
    segs: list[_Seg] = field(default_factory=list)


class PrefixTracker:
    """Computes `reusable_prefix_tokens` for each request as it is sent."""

    def __init__(self, max_heads: int = MAX_HEADS) -> None:
        # LRUs: with a per-request cache-buster every request brings new heads
        self._max_heads = max_heads
        self._heads: OrderedDict[str, int] = OrderedDict()      # head chain → seen
        self._head_segs: OrderedDict[str, _Seg] = OrderedDict()  # chain before → next seg
        self._sessions: dict[str, _SessionState] = {}

    def observe(self, session_id: str, prefix: Prefix, messages: tuple[Message, ...],
                tools_text: str) -> int:
        state = self._sessions.setdefault(session_id, _SessionState())
        # The segments the session's previous request (and its reply) began with, in
        # order and by digest, keep their chains: a chain hashes the whole path, so the
        # first segment that differs has a chain no earlier request of the session had
        # (barring a 96-bit hash collision) and from there on the general walk runs.
        k = _same_start(state.segs, prefix, messages)
        segs = state.segs[:k] + _segments(prefix, messages, tools_text, k)
        for i in range(k):
            if segs[i].tokens_est != (est := _estimate(prefix, messages, i)):
                segs[i] = _Seg(segs[i].digest, est, segs[i].message, segs[i].text)
        chains = state.chains[:k]
        reused = sum(seg.tokens_est for seg in segs[:k])
        chain = chains[-1] if chains else ""
        matched = True
        for i in range(k, len(segs)):
            seg = segs[i]
            nxt = _chain(chain, seg.digest)
            if matched and i < HEAD_SEGMENTS and nxt in self._heads:
                reused += seg.tokens_est
            elif matched:
                matched = False
                reused += self._partial(state, i, chain, seg)
            chains.append(nxt)
            chain = nxt
        for i in range(min(HEAD_SEGMENTS, len(segs))):
            parent = chains[i - 1] if i else ""
            _remember(self._heads, chains[i], 0, self._max_heads)
            _remember(self._head_segs, parent, segs[i], self._max_heads)
        self._sessions[session_id] = _SessionState(chains, segs)
        return reused

    def _partial(self, state: _SessionState, i: int, chain_before: str, seg: _Seg) -> int:
        """Tokens of text that `seg` shares at its start with the segment that followed
        the same chain earlier (in this session, or in the run's heads)."""
        other: _Seg | None = None
        if i < len(state.segs) and (i == 0 or state.chains[i - 1] == chain_before):
            other = state.segs[i]
        elif i < HEAD_SEGMENTS:
            other = self._head_segs.get(chain_before)
        if other is None:
            return 0
        if seg.message is None or other.message is None:
            return _shared_tokens(seg, other)
        key = (seg.digest, other.digest)
        if key in _partials:
            _partials.move_to_end(key)
            return _partials[key]
        return _remember(_partials, key, _shared_tokens(seg, other), MAX_PARTIALS)

    def extend(self, session_id: str, reply: Message) -> None:
        """Count the server's own reply as seen: an engine caches the tokens it
        generated, so the next request can reuse them (a perfect cache would)."""
        state = self._sessions.get(session_id)
        if state is None or not state.chains:
            return
        state.chains.append(_chain(state.chains[-1], reply.digest))
        state.segs.append(_Seg(reply.digest, reply.tokens_est, message=reply))

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
