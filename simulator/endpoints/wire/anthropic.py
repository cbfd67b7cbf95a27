"""The Anthropic Messages stream: its event grammar and the event → response accumulator,
and the request's headers and body on the raw clients.

Pure (no I/O): the lean endpoint feeds raw body chunks to `sse.SSEParser` and the events
to `StreamState`; the SDK endpoint feeds the SDK's decoded events to the same
`StreamState`, so both paths build their `LLMResponse` with the same code.

Hot-path economy: a `content_block_delta` event is recognised by its byte prefix and its
JSON is *not* parsed on arrival; the raw data is kept and all deltas of a reply are
decoded in one `json.loads` call when the stream ends. Only the rare events
(message_start, content_block_start, message_delta, error …) are parsed as they come.
Times are whatever monotonic clock the caller passes in (seconds).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simulator.endpoints.base import ErrorType, LLMRequest, LLMResponse, Usage
from simulator.endpoints.wire.sse import (
    COMPACT_JSON,
    SSEParser,
    StreamFault,
    check_content_size,
    loads_event,
    parse_block,
)
from simulator.endpoints.wire.times import DeltaTimes
from simulator.protocol.messages import Block, TextBlock, ToolUseBlock
from simulator.util import tokens
from simulator.util.visible import visible

ANTHROPIC_VERSION = "2023-06-01"


def stream_error_type(body: object) -> ErrorType:
    """Classify an `error` event's body: overloaded → OVERLOADED, else STREAM_ERROR."""
    err = body.get("error") if isinstance(body, dict) else None
    etype = err.get("type") if isinstance(err, dict) else None
    return ErrorType.OVERLOADED if etype == "overloaded_error" else ErrorType.STREAM_ERROR


@dataclass(slots=True)
class _BlockInfo:
    kind: str
    id: str = ""
    name: str = ""


# A block's delta prefixes with their lengths, and its payload pieces: (compact, len,
# spaced, len, pieces). Prefixes that never match (b"\x00"): every delta takes the
# slow, checked path.
_Fast = tuple[bytes, int, bytes, int, list[bytes]]
_NO_FAST_PATH: _Fast = (b"\x00", 1, b"\x00", 1, [])

_FIELD = {"text": ("text_delta", "text"), "tool_use": ("input_json_delta", "partial_json")}


@functools.lru_cache(maxsize=256)
def _fast_prefixes(index: int, kind: str) -> tuple[bytes, bytes]:
    """Byte prefixes (compact and `json.dumps`-spaced JSON) of a delta event for block
    `index` whose payload string starts right after; b"\x00" (never matches) otherwise."""
    if kind not in _FIELD:
        return b"\x00", b"\x00"
    dtype, fld = _FIELD[kind]
    compact = (f'event: content_block_delta\ndata: {{"type":"content_block_delta",'
               f'"index":{index},"delta":{{"type":"{dtype}","{fld}":"')
    spaced = (f'event: content_block_delta\ndata: {{"type": "content_block_delta", '
              f'"index": {index}, "delta": {{"type": "{dtype}", "{fld}": "')
    return compact.encode(), spaced.encode()


class StreamState(DeltaTimes):
    """Accumulates one streamed reply: timings, usage, stop reason, content deltas.

    Lean path: the payload of a standard delta event is kept as its JSON-escaped bytes
    (`block[len(prefix):-3]`, the inside of the string literal); a block's pieces are
    decoded with one `json.loads` at the end. SDK path: decoded strings via `add_delta`.
    """

    __slots__ = ("_blocks", "_esc", "_fast", "_open", "_parser", "_started", "_txt",
                 "stop_reason", "stopped", "usage")

    def __init__(self, sent: float) -> None:
        super().__init__(sent)
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.stopped = False
        self._blocks: dict[int, _BlockInfo] = {}
        self._esc: dict[int, list[bytes]] = {}   # escaped payload pieces (lean path)
        self._txt: dict[int, list[str]] = {}     # decoded payload pieces (SDK path)
        # No fast path before a block is started: a delta then is a grammar error.
        self._fast: _Fast = _NO_FAST_PATH
        self._parser: SSEParser | None = None
        self._started = False            # message_start seen
        self._open: set[int] = set()     # content blocks started and not stopped

    # -- raw byte paths (lean, aiohttp) ----------------------------------------------
    def feed_bytes(self, chunk: bytes, now: float) -> None:
        """Body bytes that arrived at `now`: split into events, handled at once."""
        parser = self._parser
        if parser is None:
            parser = self._parser = SSEParser()
        elif not parser.pending and chunk[-5:] == b'"}}\n\n':
            # A paced server sends one standard delta event per read: take its payload
            # directly when nothing is buffered and the chunk is exactly that event (no
            # newline between the prefix and the end: a JSON string holds none, raw).
            # Slices and `in`, not startswith/find: those parse their arguments in
            # Python 3.11 at several times the cost, once a token.
            compact, lc, spaced, ls, parts = self._fast
            lp = lc if chunk[:lc] == compact else ls if chunk[:ls] == spaced else 0
            if lp:
                piece = chunk[lp:-5]
                if 10 not in piece:  # no b"\n"
                    parts.append(piece)
                    self.mark(now)
                    return
        blocks = parser.feed(chunk)
        if blocks:
            self.feed_blocks(blocks, now)

    def end_of_body(self, now: float) -> None:
        """The body ended: a final event without its blank line still counts."""
        tail = self._parser.pending.strip() if self._parser is not None else b""
        if tail and not self.stopped:
            self.feed_blocks([tail], now)

    # -- raw event blocks ------------------------------------------------------------
    def feed_blocks(self, blocks: Iterable[bytes], now: float) -> None:
        """Handle complete SSE blocks that arrived together at `now`."""
        compact, lc, spaced, ls, parts = self._fast
        n = 0
        for block in blocks:
            if block.endswith(b'"}}'):
                if block.startswith(compact):
                    parts.append(block[lc:-3])
                    n += 1
                    continue
                if block.startswith(spaced):
                    parts.append(block[ls:-3])
                    n += 1
                    continue
            if block:
                if n:  # deltas before a rare event count even if it raises
                    self.mark(now, n)
                    n = 0
                name, data = parse_block(block)
                self._slow_event(name, data, now)
                compact, lc, spaced, ls, parts = self._fast
        if n:
            self.mark(now, n)

    def _slow_event(self, name: str, data: bytes, now: float) -> None:
        if not data:
            return
        if name and name != "message" and name != "content_block_delta" \
                and name not in _HANDLED:
            return  # ping, content_block_stop, unknown: ignored unparsed
        body = loads_event(data, name or "untyped")
        if not isinstance(body, dict):
            raise StreamFault(ErrorType.MALFORMED, f"{name or 'untyped'} event is not an object")
        if not name or name == "message":  # data-only stream: the type is in the JSON
            name = str(body.get("type", ""))
        if name == "content_block_delta":
            self._generic_delta(body, now)
        elif name in _HANDLED:
            self.on_event(name, body)

    def _generic_delta(self, body: Mapping[str, object], now: float) -> None:
        """A delta in non-standard framing: decoded, re-escaped into the same pieces."""
        delta = body.get("delta")
        if not isinstance(delta, dict):
            raise StreamFault(ErrorType.MALFORMED, "content_block_delta without a delta")
        self._expect_delta(_index(body, "content_block_delta"), body)
        kind = delta.get("type")
        payload = delta.get("text") if kind == "text_delta" else (
            delta.get("partial_json") if kind == "input_json_delta" else None)
        if isinstance(payload, str):
            esc = json.dumps(payload)[1:-1].encode()
            self._esc.setdefault(_index(body, "content_block_delta"), []).append(esc)
        self.mark(now)

    # -- both paths: decoded events ----------------------------------------------------
    def add_delta(self, index: int, kind: str, payload: str, now: float) -> None:
        """A decoded content delta (SDK path); `payload` is text or partial JSON."""
        self._expect_delta(index, {"index": index, "delta": {"type": kind}})
        if kind in ("text_delta", "input_json_delta"):
            self._txt.setdefault(index, []).append(payload)
        self.mark(now)

    # -- the event grammar (issue 29): message_start, then blocks started before their
    # deltas and stopped after them, message_delta, message_stop last; ping and error
    # anywhere. Anything else ends the attempt as MALFORMED, naming the event.
    def _expect_delta(self, index: int, body: Mapping[str, object]) -> None:
        if not self._started or self.stopped or index not in self._open:
            where = ("before message_start" if not self._started else "after message_stop"
                     if self.stopped else f"for block {index}, which was not started")
            raise _grammar_fault(f"content_block_delta {where}", "content_block_delta", body)

    def _expect(self, name: str, body: Mapping[str, object]) -> None:
        if name == "error":
            return
        if self.stopped:
            raise _grammar_fault(f"{name} after message_stop", name, body)
        if name == "message_start":
            if self._started:
                raise _grammar_fault("a second message_start", name, body)
            self._started = True
            return
        if not self._started:
            raise _grammar_fault(f"{name} before message_start", name, body)
        if name == "content_block_start":
            index = _index(body, name)
            if index in self._blocks:
                raise _grammar_fault(f"block {index} started twice", name, body)
            self._open.add(index)
        elif name == "content_block_stop":
            index = _index(body, name)
            if index not in self._open:
                raise _grammar_fault(f"content_block_stop for block {index}, which is "
                                     "not open", name, body)
            self._open.discard(index)

    def on_event(self, name: str, body: Mapping[str, Any]) -> None:
        """A decoded non-delta event. Raises `StreamFault` for an `error` event and for
        an event out of the stream's grammar."""
        self._expect(name, body)
        if name == "message_start":
            msg = body.get("message") or {}
            self.usage = self.usage.merged(Usage.from_mapping(msg.get("usage")))
        elif name == "content_block_start":
            cb = body.get("content_block") or {}
            if not isinstance(cb, dict):
                raise _grammar_fault("content_block is not an object", name, body)
            index, kind = _index(body, name), str(cb.get("type", ""))
            self._blocks[index] = _BlockInfo(kind, str(cb.get("id", "")),
                                             str(cb.get("name", "")))
            compact, spaced = _fast_prefixes(index, kind)
            self._fast = (compact, len(compact), spaced, len(spaced),
                          self._esc.setdefault(index, []))
        elif name == "message_delta":
            delta = body.get("delta") or {}
            if delta.get("stop_reason") is not None:
                self.stop_reason = str(delta["stop_reason"])
            self.usage = self.usage.merged(Usage.from_mapping(body.get("usage")))
        elif name == "content_block_stop":
            self._fast = _NO_FAST_PATH    # its deltas are over: the slow path checks
        elif name == "message_stop":
            self.stopped = True
            self._fast = _NO_FAST_PATH
        elif name == "error":
            err = body.get("error")
            msg = err.get("message", "") if isinstance(err, dict) else err
            if not isinstance(msg, str) or not msg:    # keep what the server did say
                msg = str(dict(body))[:200]
            raise StreamFault(stream_error_type(body), f"error event after HTTP 200: {msg}")

    # -- results ---------------------------------------------------------------------------
    def _payload(self, index: int) -> str:
        esc = self._esc.get(index)
        text = loads_event(b'"' + b"".join(esc) + b'"', "content_block_delta") if esc else ""
        if not isinstance(text, str):
            raise StreamFault(ErrorType.MALFORMED, "content_block_delta payload")
        txt = self._txt.get(index)
        return text + "".join(txt) if txt else text

    def content(self) -> tuple[tuple[Block, ...], int]:
        """(content blocks, cl100k estimate of the generated text and tool input)."""
        check_content_size([*self._esc.values(), *self._txt.values()])
        blocks: list[Block] = []
        total = 0
        used = {i for i, v in self._esc.items() if v} | self._txt.keys()
        for index in sorted(self._blocks.keys() | used):
            info = self._blocks.get(index, _BlockInfo("text"))
            if info.kind == "tool_use":
                js = self._payload(index) or "{}"
                loads_event(js, "input_json_delta")
                n = tokens.count(js)
                blocks.append(ToolUseBlock(info.id, info.name, js, n + 8))
            elif info.kind == "text":
                text = self._payload(index)
                n = tokens.count(text)
                blocks.append(TextBlock(text, n))
            else:  # thinking / redacted_thinking: not kept in history, not counted
                continue
            total += n
        return tuple(blocks), total

    def response(self, done: float, request_id: str | None = None) -> LLMResponse:
        """The finished reply; `extra` holds `token_times` (one monotonic time per delta)
        and the server's `request_id` header. Raises `StreamFault` (DISCONNECT) if the
        stream never reached message_stop."""
        if not self.stopped:
            raise StreamFault(ErrorType.DISCONNECT, "stream ended before message_stop")
        content, est = self.content()
        return LLMResponse(content, self.stop_reason, self.usage, self.timing(done), est,
                           200, {"token_times": self.times, "request_id": request_id})


_HANDLED = frozenset({"message_start", "content_block_start", "content_block_stop",
                      "message_delta", "message_stop", "error"})


def _index(body: Mapping[str, object], name: str) -> int:
    """A block event's `index` (a non-negative int; MALFORMED otherwise)."""
    index = body.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 10_000:
        raise _grammar_fault("index is not a block number", name, body)
    return index


def _grammar_fault(what: str, name: str, body: Mapping[str, object]) -> StreamFault:
    """MALFORMED, with the offending event (cut, control characters escaped)."""
    shown = visible(json.dumps(dict(body), separators=(",", ":"), default=str), 160)
    return StreamFault(ErrorType.MALFORMED, f"out of the stream grammar: {what} "
                                            f"(event {name}: {shown})")


def request_headers(api_key: str) -> dict[str, str]:
    """Headers of every streamed Messages request from the raw clients (lean, aiohttp)."""
    headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION,
               "accept": "text/event-stream"}
    if api_key:
        headers["x-api-key"] = api_key  # Anthropic's header
        headers["authorization"] = f"Bearer {api_key}"  # vLLM's --api-key check
    return headers


def stream_body(request: LLMRequest) -> bytes:
    """The compact JSON body of a streamed Messages request."""
    body = request.to_api_kwargs()
    body["stream"] = True
    return COMPACT_JSON.encode(body).encode()
