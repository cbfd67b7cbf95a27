"""Incremental Anthropic SSE parsing and the event → response accumulator.

Pure (no I/O): the lean endpoint feeds raw body chunks to `SSEParser` and the events to
`StreamState`; the SDK endpoint feeds the SDK's decoded events to the same `StreamState`,
so both paths build their `LLMResponse` with the same code.

Hot-path economy: a `content_block_delta` event is recognised by its byte prefix and its
JSON is *not* parsed on arrival; the raw data is kept and all deltas of a reply are
decoded in one `json.loads` call when the stream ends. Only the rare events
(message_start, content_block_start, message_delta, error …) are parsed as they come.
Times are whatever monotonic clock the caller passes in (seconds).
"""

from __future__ import annotations

import json
import time
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from simulator import tokens
from simulator.endpoints.base import (
    EndpointError,
    ErrorType,
    LLMRequest,
    LLMResponse,
    Timing,
    Usage,
    classify_status,
)
from simulator.protocol.messages import Block, TextBlock, ToolUseBlock
from simulator.visible import visible

ANTHROPIC_VERSION = "2023-06-01"


class StreamFault(Exception):
    """The stream said or did something that ends the attempt (classified)."""

    def __init__(self, error_type: ErrorType, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


# The longest SSE event (bytes up to its blank line) a stream may send: a delta is tens
# of bytes, a whole tool call sent as one chunk some hundreds of kilobytes. Enforced as
# bytes arrive, so a stream with no line feed ends here, not at the response limit.
MAX_EVENT_BYTES = 8 * 2**20


# The most reply content (text and tool input, bytes) decoded and token-counted: 16 MiB
# is ~4M tokens, far past any max_tokens; counting more would take minutes and
# gigabytes (the 1 GB delta stream), so a larger reply is RESPONSE_TOO_LARGE.
MAX_REPLY_CONTENT_BYTES = 16 * 2**20


def check_content_size(pieces: Iterable[list[bytes] | list[str]]) -> None:
    """StreamFault (RESPONSE_TOO_LARGE) when the pieces add up past the content cap."""
    total = sum(len(p) for parts in pieces for p in parts)
    if total > MAX_REPLY_CONTENT_BYTES:
        raise StreamFault(ErrorType.RESPONSE_TOO_LARGE, f"reply content of {total} bytes "
                          f"(more than {MAX_REPLY_CONTENT_BYTES})")


class SSEParser:
    """Splits a byte stream into complete SSE event blocks (blank-line separated)."""

    __slots__ = ("_buf", "limit")

    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        self._buf = b""
        self.limit = limit

    def feed(self, chunk: bytes) -> list[bytes]:
        """Complete event blocks in `chunk` (plus what was buffered); keeps the tail.
        StreamFault (MALFORMED) once the unfinished event passes `limit` bytes."""
        old = self._buf
        if old and b"\r" not in chunk and not old.endswith(b"\r") \
                and b"\n\n" not in old[-1:] + chunk[:1] and b"\n\n" not in chunk:
            # no event ends in this chunk: append without rescanning what was buffered
            if len(old) + len(chunk) > self.limit:
                raise StreamFault(ErrorType.MALFORMED, f"an SSE event longer than "
                                  f"{self.limit} bytes (no blank line)")
            self._buf = old + chunk
            return []
        buf = old + chunk if old else chunk
        if b"\r" in buf:
            buf = _normalise_newlines(buf)
        end = buf.rfind(b"\n\n")
        if end < 0:
            if len(buf) > self.limit:
                raise StreamFault(ErrorType.MALFORMED, f"an SSE event longer than "
                                  f"{self.limit} bytes (no blank line)")
            self._buf = buf
            return []
        if len(buf) - end - 2 > self.limit:
            raise StreamFault(ErrorType.MALFORMED, f"an SSE event longer than "
                              f"{self.limit} bytes (no blank line)")
        self._buf = buf[end + 2:]
        return buf[:end].split(b"\n\n")

    @property
    def pending(self) -> bytes:
        """Bytes received but not yet part of a complete event."""
        return self._buf


def _normalise_newlines(buf: bytes) -> bytes:
    """CRLF / CR → LF, leaving a trailing CR alone (its LF may be in the next chunk)."""
    tail = b"\r" if buf.endswith(b"\r") else b""
    body = buf[:-1] if tail else buf
    return body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail


def parse_block(block: bytes) -> tuple[str, bytes]:
    """(event name, data) of one SSE event block, per the WHATWG field rules."""
    name = ""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[0] == 58:  # b":" comment line
            continue
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value)
    return name, b"\n".join(data)


def _loads(data: bytes | str, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise StreamFault(ErrorType.MALFORMED, f"unparseable JSON in {what} event") from e


def stream_error_type(body: Any) -> ErrorType:
    """Classify an `error` event's body: overloaded → OVERLOADED, else STREAM_ERROR."""
    err = body.get("error") if isinstance(body, dict) else None
    etype = err.get("type") if isinstance(err, dict) else None
    return ErrorType.OVERLOADED if etype == "overloaded_error" else ErrorType.STREAM_ERROR


@dataclass(slots=True)
class _BlockInfo:
    kind: str
    id: str = ""
    name: str = ""


# Prefixes that never match (b"\x00"): every delta takes the slow, checked path.
_NO_FAST_PATH: tuple[bytes, bytes, list[bytes]] = (b"\x00", b"\x00", [])

_FIELD = {"text": ("text_delta", "text"), "tool_use": ("input_json_delta", "partial_json")}


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


class DeltaTimes:
    """Per-token timestamps of one attempt, shared by every dialect's reply state:
    `mark` one arrival time per delta; `timing` and `failure` report them."""

    __slots__ = ("first", "last", "n_deltas", "sent", "times")

    def __init__(self, sent: float) -> None:
        self.sent = sent
        self.first: float | None = None
        self.last: float | None = None
        self.n_deltas = 0
        self.times = array("d")

    def mark(self, now: float, k: int = 1) -> None:
        """Record `k` content deltas arriving at `now` (seconds)."""
        if self.first is None:
            self.first = now
        self.last = now
        self.n_deltas += k
        if k == 1:
            self.times.append(now)
        else:
            self.times.extend([now] * k)

    def content(self) -> tuple[tuple[Block, ...], int]:
        """(content blocks, token estimate): the subclass's reply."""
        return (), self.n_deltas

    def partial_output_tokens(self) -> int:
        """Best estimate of tokens received so far (for a failed attempt)."""
        try:
            return self.content()[1]
        except StreamFault:
            return self.n_deltas

    def timing(self, done: float | None) -> Timing:
        return Timing(self.sent, self.first, self.last, done, self.n_deltas)

    def failure(self, kind: ErrorType, message: str, status: int | None,
                now: float) -> EndpointError:
        """The attempt's `EndpointError`, with the timings and tokens received so far."""
        return EndpointError(kind, message, status=status, timing=self.timing(now),
                             partial_output_tokens=self.partial_output_tokens())


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
        self._fast: tuple[bytes, bytes, list[bytes]] = _NO_FAST_PATH
        self._parser: SSEParser | None = None
        self._started = False            # message_start seen
        self._open: set[int] = set()     # content blocks started and not stopped

    # -- raw byte paths (lean, aiohttp) ----------------------------------------------
    def feed_bytes(self, chunk: bytes, now: float) -> None:
        """Body bytes that arrived at `now`: split into events, handled at once."""
        parser = self._parser
        if parser is None:
            parser = self._parser = SSEParser()
        elif not parser.pending and chunk.endswith(b'"}}\n\n'):
            # A paced server sends one standard delta event per read: take its payload
            # directly when nothing is buffered and the chunk is exactly that event (no
            # newline between the prefix and the end: a JSON string holds none, raw).
            compact, spaced, parts = self._fast
            lp = len(compact) if chunk.startswith(compact) else (
                len(spaced) if chunk.startswith(spaced) else 0)
            if lp and chunk.find(b"\n", lp) == len(chunk) - 2:
                parts.append(chunk[lp:-5])
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
        compact, spaced, parts = self._fast
        lc, ls = len(compact), len(spaced)
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
                compact, spaced, parts = self._fast
                lc, ls = len(compact), len(spaced)
        if n:
            self.mark(now, n)

    def _slow_event(self, name: str, data: bytes, now: float) -> None:
        if not data:
            return
        if name and name != "message" and name != "content_block_delta" \
                and name not in _HANDLED:
            return  # ping, content_block_stop, unknown: ignored unparsed
        body = _loads(data, name or "untyped")
        if not isinstance(body, dict):
            raise StreamFault(ErrorType.MALFORMED, f"{name or 'untyped'} event is not an object")
        if not name or name == "message":  # data-only stream: the type is in the JSON
            name = str(body.get("type", ""))
        if name == "content_block_delta":
            self._generic_delta(body, now)
        elif name in _HANDLED:
            self.on_event(name, body)

    def _generic_delta(self, body: Mapping[str, Any], now: float) -> None:
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
    def _expect_delta(self, index: int, body: Mapping[str, Any]) -> None:
        if not self._started or self.stopped or index not in self._open:
            where = ("before message_start" if not self._started else "after message_stop"
                     if self.stopped else f"for block {index}, which was not started")
            raise _grammar_fault(f"content_block_delta {where}", "content_block_delta", body)

    def _expect(self, name: str, body: Mapping[str, Any]) -> None:
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
            self._fast = (*_fast_prefixes(index, kind), self._esc.setdefault(index, []))
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
        text = _loads(b'"' + b"".join(esc) + b'"', "content_block_delta") if esc else ""
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
                _loads(js, "input_json_delta")
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


def request_id(get: Callable[[str], str | None]) -> str | None:
    """The server's id for a request: the twin's `x-endurance-request-id`, else Anthropic's
    `request-id` (for the twin's `/debug/requests/{id}`)."""
    return get("x-endurance-request-id") or get("request-id")


_HANDLED = frozenset({"message_start", "content_block_start", "content_block_stop",
                      "message_delta", "message_stop", "error"})


def _index(body: Mapping[str, Any], name: str) -> int:
    """A block event's `index` (a non-negative int; MALFORMED otherwise)."""
    index = body.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 10_000:
        raise _grammar_fault("index is not a block number", name, body)
    return index


def _grammar_fault(what: str, name: str, body: Mapping[str, Any]) -> StreamFault:
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
    return json.dumps(body, separators=(",", ":")).encode()


def hint_headers(hints: Mapping[str, str]) -> dict[str, str]:
    """`{"turn_kind": "edit"}` → `{"x-endurance-turn-kind": "edit"}`."""
    return {f"x-endurance-{k.replace('_', '-').lower()}": str(v) for k, v in hints.items()}


def status_error(status: int, body: bytes | str, get: Callable[[str], str | None],
                 timing: Timing | None = None) -> EndpointError:
    """A non-200 reply, classified from its status and (bounded) body text, with the
    server's retry-after hint."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return EndpointError(classify_status(status, text), f"HTTP {status}: {text[:200]}",
                         status=status, retry_after_s=parse_retry_after(get, time.time()),
                         timing=timing)


def parse_retry_after(get: Callable[[str], str | None], now_epoch: float) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or HTTP date)."""
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(ra).timestamp() - now_epoch)
    except (TypeError, ValueError, IndexError):
        return None
