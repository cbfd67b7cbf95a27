"""Server-sent events, parsed from the exact bytes, and the Messages stream grammar.

Pure functions, no I/O. The grammar is Anthropic's: `message_start`, then for each
content block `content_block_start`, `content_block_delta`*, `content_block_stop`, then
`message_delta` (with `stop_reason`), then `message_stop`. `ping` may come anywhere and
unknown event names are ignored, as the Anthropic SDK does. The SDK dispatches on the
`event:` line, so a missing or mismatched event name is a protocol error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from simulator.endpoints.wire.sse import SSEParser, parse_block
from simulator.util.jsontypes import JSONObject, JSONValue, as_object

KNOWN_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta",
                          "content_block_stop", "message_delta", "message_stop", "ping",
                          "error"})
# which delta types may follow which content block type
DELTA_FOR_BLOCK = {
    "text": frozenset({"text_delta", "citations_delta"}),
    "tool_use": frozenset({"input_json_delta"}),
    "server_tool_use": frozenset({"input_json_delta"}),
    "thinking": frozenset({"thinking_delta", "signature_delta"}),
    "redacted_thinking": frozenset(),
}


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its `event:` name (None when absent) and `data:` text."""

    event: str | None
    data: str

    def json(self) -> JSONValue:
        value: JSONValue = json.loads(self.data)
        return value


def parse_sse(raw: bytes) -> tuple[list[SseEvent], bytes]:
    """(events, unterminated tail) of a whole SSE body. Framing is the client's own
    (`simulator.endpoints.wire.sse`), so the check sees what the load generator sees; a tail
    without a closing blank line is what a WHATWG client discards."""
    parser = SSEParser()
    events = []
    for block in parser.feed(raw):
        name, data = parse_block(block)
        if data or name:
            events.append(SseEvent(name or None, data.decode("utf-8", errors="replace")))
    return events, parser.pending


@dataclass(slots=True)
class StreamSummary:
    """What a stream said, and what was wrong with it (`errors` → fail, `notes` → warn)."""

    names: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)   # unknown event names, skipped
    block_types: list[str] = field(default_factory=list)
    text: str = ""
    usage_start: JSONObject | None = None
    usage_delta: JSONObject | None = None
    stop_reason: JSONValue = None      # as sent (a lying server's may not be a string)
    message: JSONObject = field(default_factory=dict)


class _Grammar:
    """A state machine over the event sequence; records the first violations."""

    def __init__(self) -> None:
        self.s = StreamSummary()
        self.state = "start"          # start → message → block → message → delta → done
        self.open_index: int | None = None

    def feed(self, ev: SseEvent) -> None:
        try:
            data = ev.json()
        except ValueError:
            self.s.errors.append(f"data is not JSON: {ev.data[:60]!r}")
            return
        kind = data.get("type") if isinstance(data, dict) else None
        if ev.event is None:
            self.s.errors.append(f"event without an `event:` line (data type {kind!r})")
        elif kind != ev.event:
            self.s.errors.append(f"event name {ev.event!r} but data type {kind!r}")
        name = ev.event or str(kind)
        self.s.names.append(name)
        if name not in KNOWN_EVENTS:
            self.s.ignored.append(name)
            return
        if self.state == "start" and name not in ("message_start", "ping", "error"):
            self._missing_start(name)
        if name != "ping" and isinstance(data, dict):
            getattr(self, "_on_" + name)(data)

    def _missing_start(self, name: str) -> None:
        """One error for a stream that skips `message_start`, then carry on as if it had
        come, so the rest of the stream is judged on its own (no cascade of errors)."""
        self.s.errors.append(
            f"no message_start: the stream began with {name} (llama.cpp sends "
            "message_start with the first token it emits, so a first token it holds back, "
            "an incomplete UTF-8 sequence, loses it)")
        self.state = "message"

    def _expect(self, name: str, *states: str) -> bool:
        if self.state in states:
            return True
        prev = self.s.names[-2] if len(self.s.names) > 1 else "nothing"
        self.s.errors.append(f"{name} out of order (after {prev})")
        return False

    def _on_error(self, data: dict[str, object]) -> None:
        self.s.errors.append(f"error event: {json.dumps(data.get('error'))[:120]}")

    def _on_message_start(self, data: dict[str, object]) -> None:
        if self._expect("message_start", "start"):
            self.state = "message"
        msg = data.get("message")
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            self.s.errors.append("message_start without an assistant `message` object")
            return
        self.s.message = msg
        usage = msg.get("usage")
        self.s.usage_start = usage if isinstance(usage, dict) else None

    def _on_content_block_start(self, data: dict[str, object]) -> None:
        if self._expect("content_block_start", "message"):
            self.state = "block"
        index, block = data.get("index"), data.get("content_block")
        if index != len(self.s.block_types):
            self.s.errors.append(f"content_block_start index {index}, expected "
                                 f"{len(self.s.block_types)}")
        btype = block.get("type") if isinstance(block, dict) else None
        self.s.block_types.append(str(btype))
        self.open_index = index if isinstance(index, int) else None
        if btype not in DELTA_FOR_BLOCK:
            self.s.notes.append(f"unknown content block type {btype!r}")

    def _on_content_block_delta(self, data: dict[str, object]) -> None:
        self._expect("content_block_delta", "block")
        if data.get("index") != self.open_index:
            self.s.errors.append(f"delta for index {data.get('index')}, open block is "
                                 f"{self.open_index}")
        delta = as_object(data.get("delta"))
        dtype = delta.get("type")
        allowed = DELTA_FOR_BLOCK.get(self.s.block_types[-1] if self.s.block_types else "")
        if allowed is not None and dtype not in allowed:
            self.s.errors.append(f"{dtype!r} inside a {self.s.block_types[-1]!r} block")
        if dtype == "text_delta":
            self.s.text += str(delta.get("text", ""))

    def _on_content_block_stop(self, data: dict[str, object]) -> None:
        if self._expect("content_block_stop", "block"):
            self.state = "message"
        if data.get("index") != self.open_index:
            self.s.errors.append(f"content_block_stop index {data.get('index')}, open "
                                 f"block is {self.open_index}")
        self.open_index = None

    def _on_message_delta(self, data: dict[str, object]) -> None:
        if self._expect("message_delta", "message", "delta"):
            self.state = "delta"
        delta = as_object(data.get("delta"))
        self.s.stop_reason = delta.get("stop_reason") or self.s.stop_reason
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.s.usage_delta = {**(self.s.usage_delta or {}), **usage}

    def _on_message_stop(self, data: dict[str, object]) -> None:
        if self._expect("message_stop", "delta"):
            self.state = "done"


def check_stream(events: list[SseEvent], tail: bytes = b"") -> StreamSummary:
    """Walk the events through the Messages stream grammar; `tail` is what came after
    the last complete event (must be blank)."""
    g = _Grammar()
    for ev in events:
        g.feed(ev)
    if tail.strip():
        g.s.errors.append(f"unterminated event at the end (no blank line): {tail[:60]!r}")
    if g.state != "done" and not g.s.errors:
        g.s.errors.append(f"stream ended in state {g.state!r} (no message_stop)")
    if g.s.stop_reason is None:
        g.s.errors.append("no stop_reason in any message_delta")
    return g.s
