"""OpenAI Chat Completions: the conversation in OpenAI's shape and the streamed-chunk
accumulator. Pure (no I/O); both the byte transports and the `openai` SDK feed it.

Rendering: the system prompt as the first `system` message; tools as `function` schemas
(`input_schema` → `parameters`); assistant tool calls as `tool_calls` (arguments are the
JSON text we already hold); each tool result as a `role: tool` message with its
`tool_call_id`, before the user text of the same turn. Streaming asks for
`stream_options: {include_usage: true}`, the only way to get usage in a stream.

Records: `prompt_tokens` is the whole prompt, `prompt_tokens_details.cached_tokens` the
prefix-cache hit, so `Usage.input_tokens` = prompt − cached, `cache_read_input_tokens` =
cached and `cache_creation_input_tokens` stays None (OpenAI does not report it: unknown,
never 0). A stream without a usage chunk leaves every usage field None. Content,
reasoning and tool-call argument deltas each count as one delta (TTFT/ITL); the first
chunk with choices, text or not (a role chunk), is kept apart as vLLM's bench TTFT;
`finish_reason` is mapped to the Anthropic stop reason the rest of endurance knows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from simulator.endpoints.base import ErrorType, LLMRequest, LLMResponse, Usage
from simulator.endpoints.wire.sse import COMPACT_JSON, SSEParser, StreamFault, check_content_size, parse_block
from simulator.endpoints.wire.times import DeltaTimes
from simulator.protocol.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from simulator.util import tokens

PATH = "/v1/chat/completions"
# finish_reason → the Anthropic stop_reason records and compaction already understand.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                "function_call": "tool_use", "content_filter": "refusal"}


def tool_schema(tool: Mapping[str, object]) -> dict[str, object]:
    """An Anthropic tool definition as an OpenAI `function` tool."""
    fn: dict[str, object] = {"name": tool.get("name", ""),
                             "parameters": tool.get("input_schema") or {"type": "object"}}
    if tool.get("description"):
        fn["description"] = tool["description"]
    return {"type": "function", "function": fn}


def render_message(m: Message) -> list[dict[str, object]]:
    """One history message as OpenAI chat messages (a user turn with tool results
    becomes its `tool` messages, then the user text)."""
    if m.role == "assistant":
        text = "".join(b.text for b in m.blocks if isinstance(b, TextBlock))
        calls = [{"id": b.id, "type": "function",
                  "function": {"name": b.name, "arguments": b.input_json}}
                 for b in m.blocks if isinstance(b, ToolUseBlock)]
        out: dict[str, object] = {"role": "assistant", "content": text or (None if calls else "")}
        if calls:
            out["tool_calls"] = calls
        return [out]
    msgs: list[dict[str, object]] = [
        {"role": "tool", "tool_call_id": b.tool_use_id, "content": b.content}
        for b in m.blocks if isinstance(b, ToolResultBlock)]
    texts = [b.text for b in m.blocks if isinstance(b, TextBlock)]
    if texts or not msgs:
        msgs.append({"role": "user", "content": "\n".join(texts)})
    return msgs


def chat_kwargs(request: LLMRequest) -> dict[str, object]:
    """The request body (without `stream`) of `chat.completions.create`."""
    messages: list[dict[str, object]] = []
    if request.prefix.system:
        messages.append({"role": "system", "content": request.prefix.system})
    for m in request.messages:
        messages.extend(render_message(m))
    kw: dict[str, object] = {"model": request.model, "max_tokens": request.max_tokens,
                             "messages": messages}
    if request.prefix.tools:
        kw["tools"] = [tool_schema(t) for t in request.prefix.tools]
    if request.temperature is not None:
        kw["temperature"] = request.temperature
    # top_p and the frequency/presence penalties are Chat fields; top_k and
    # repetition_penalty are vLLM's extra parameters, read from the same body
    kw.update(request.sampling)
    return kw


def stream_body(request: LLMRequest) -> bytes:
    body = chat_kwargs(request)
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return COMPACT_JSON.encode(body).encode()


def request_headers(api_key: str) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def usage_of(d: object) -> Usage:
    """OpenAI usage → `Usage` (cached tokens as cache reads; creation unknown)."""
    if not isinstance(d, Mapping):
        return Usage()

    def num(v: object) -> int | None:
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    prompt, completion = num(d.get("prompt_tokens")), num(d.get("completion_tokens"))
    details = d.get("prompt_tokens_details")
    cached = num(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if prompt is not None and cached is not None:
        return Usage(max(0, prompt - cached), completion, cached, None)
    return Usage(prompt, completion, None, None)


def error_type_of(body: object) -> ErrorType:
    """An in-stream `{"error": …}` chunk: overloaded → OVERLOADED, else STREAM_ERROR."""
    err = body.get("error") if isinstance(body, Mapping) else None
    text = json.dumps(err).lower() if err is not None else ""
    return ErrorType.OVERLOADED if "overload" in text else ErrorType.STREAM_ERROR


class _Call:
    __slots__ = ("args", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []


_MARKERS = (b'"delta":{"content":"', b'"delta": {"content": "')


def _string_end(raw: bytes, start: int) -> int:
    """Index of the quote closing the JSON string that starts at `start` (-1: none)."""
    i = raw.find(b'"', start)
    while i >= 0:
        k = i
        while k > start and raw[k - 1] == 92:  # backslashes before the quote
            k -= 1
        if (i - k) % 2 == 0:
            return i
        i = raw.find(b'"', i + 1)
    return -1


def learn_frame(block: bytes, body: Mapping[str, object]) -> tuple[bytes, bytes] | None:
    """(prefix, suffix) around the content string of a plain content chunk, so the
    next chunks of the stream with the same framing skip `json.loads` (servers repeat
    id, created and model in every chunk); None when `body` is not such a chunk."""
    choices = body.get("choices")
    if body.get("usage") or not isinstance(choices, list) or len(choices) != 1:
        return None
    c = choices[0]
    if not isinstance(c, Mapping) or c.get("finish_reason") is not None:
        return None
    delta = c.get("delta")
    if not isinstance(delta, Mapping) or list(delta) != ["content"]:
        return None
    for marker in _MARKERS:
        at = block.find(marker)
        if at >= 0:
            start = at + len(marker)
            end = _string_end(block, start)
            return (block[:start], block[end:]) if end >= 0 else None
    return None


class ChatStreamState(DeltaTimes):
    """Accumulates one streamed chat completion (the `ReplyState` of this dialect).

    Hot path: once a plain content chunk has been decoded, its framing (`learn_frame`)
    lets each later chunk with the same bytes around the content string be taken as
    the string's escaped bytes, without a `json.loads`; all pieces are decoded with one
    `json.loads` when the reply ends (as `anthropic.StreamState` does for Messages)."""

    __slots__ = ("_calls", "_frame", "_parser", "_text", "finish", "stopped", "usage")

    def __init__(self, sent: float) -> None:
        super().__init__(sent)
        self.usage = Usage()
        self.finish: str | None = None
        self.stopped = False
        self._text: list[bytes] = []  # JSON-escaped content pieces
        self._calls: dict[int, _Call] = {}
        self._parser = SSEParser()
        self._frame: tuple[bytes, bytes] | None = None

    # -- bytes (lean, aiohttp) ----------------------------------------------------------
    def feed_bytes(self, chunk: bytes, now: float) -> None:
        frame = self._frame
        for block in self._parser.feed(chunk):
            if frame is not None and block.startswith(frame[0]) \
                    and block.endswith(frame[1]):
                inside = block[len(frame[0]):len(block) - len(frame[1])]
                if b'"' not in inside and b"\n" not in inside:
                    if inside:
                        self._text.append(inside)
                        self.mark(now)
                    continue
            self._block(block, now)
            frame = self._frame

    def end_of_body(self, now: float) -> None:
        tail = self._parser.pending.strip()
        if tail and not self.stopped:
            self._block(tail, now)

    def _block(self, block: bytes, now: float) -> None:
        name, data = parse_block(block)
        if not data or self.stopped:
            return
        if data == b"[DONE]":
            self.stopped = True
            return
        try:
            body = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise StreamFault(ErrorType.MALFORMED, "unparseable JSON in a chunk") from e
        if not isinstance(body, dict):
            raise StreamFault(ErrorType.MALFORMED, "chunk is not a JSON object")
        if name == "error" or "error" in body:
            self.on_error(body)
        self.on_chunk(body, now)
        if self._frame is None and not self.stopped:
            self._frame = learn_frame(block, body)

    # -- decoded chunks (both paths) ----------------------------------------------------
    def on_error(self, body: object) -> None:
        err = body.get("error") if isinstance(body, Mapping) else None
        msg = err.get("message", "") if isinstance(err, Mapping) else str(err or "")
        raise StreamFault(error_type_of(body), f"error chunk after HTTP 200: {msg}")

    def on_chunk(self, body: Mapping[str, object], now: float) -> None:
        """One `chat.completion.chunk` as a dict."""
        usage = body.get("usage")
        if usage:
            self.usage = usage_of(usage)
        choices = body.get("choices")
        if not choices:
            return
        if not isinstance(choices, list) or not isinstance(choices[0], Mapping):
            raise StreamFault(ErrorType.MALFORMED, "chunk choices is not a list of objects")
        choice = choices[0]
        self.chunk(now)        # vLLM's bench client times the first chunk with choices
        delta = choice.get("delta") or {}
        if not isinstance(delta, Mapping):
            raise StreamFault(ErrorType.MALFORMED, "chunk delta is not an object")
        n = 0
        text = delta.get("content")
        if isinstance(text, str) and text:
            self._text.append(json.dumps(text)[1:-1].encode())
            n += 1
        for key in ("reasoning_content", "reasoning"):
            r = delta.get(key)
            if isinstance(r, str) and r:
                n += 1
                break
        calls = delta.get("tool_calls")
        if calls:
            n += self._tool_calls(calls)
        if n:
            self.mark(now)
        reason = choice.get("finish_reason")
        if reason:
            self.finish = str(reason)

    def _tool_calls(self, calls: object) -> int:
        if not isinstance(calls, list):
            raise StreamFault(ErrorType.MALFORMED, "delta tool_calls is not a list")
        n = 0
        for i, c in enumerate(calls):
            if not isinstance(c, Mapping):
                raise StreamFault(ErrorType.MALFORMED, "a tool call delta is not an object")
            idx = c.get("index", i)
            call = self._calls.setdefault(idx if isinstance(idx, int) else i, _Call())
            if c.get("id"):
                call.id = str(c["id"])
            fn = c.get("function") or {}
            if isinstance(fn, Mapping):
                if fn.get("name") and not call.name:
                    call.name = str(fn["name"])
                args = fn.get("arguments")
                if isinstance(args, str) and args:
                    call.args.append(args)
                    n = 1
        return n

    # -- results ------------------------------------------------------------------------
    def content(self) -> tuple[tuple[Block, ...], int]:
        check_content_size([self._text, *(c.args for c in self._calls.values())])
        blocks: list[Block] = []
        total = 0
        text = ""
        if self._text:
            try:
                text = json.loads(b'"' + b"".join(self._text) + b'"')
            except (ValueError, UnicodeDecodeError) as e:
                raise StreamFault(ErrorType.MALFORMED, "unparseable content deltas") from e
        if text:
            n = tokens.count(text)
            blocks.append(TextBlock(text, n))
            total += n
        for idx in sorted(self._calls):
            call = self._calls[idx]
            js = "".join(call.args) or "{}"
            try:
                json.loads(js)
            except ValueError as e:
                raise StreamFault(ErrorType.MALFORMED,
                                  "tool call arguments are not JSON") from e
            n = tokens.count(js)
            blocks.append(ToolUseBlock(call.id or f"call_{idx}", call.name, js, n + 8))
            total += n
        return tuple(blocks), total


    def response(self, done: float, request_id: str | None = None) -> LLMResponse:
        """The finished reply; a stream that ended with neither `[DONE]` nor a
        finish_reason was cut (DISCONNECT)."""
        if not self.stopped and self.finish is None:
            raise StreamFault(ErrorType.DISCONNECT, "stream ended before finish_reason/[DONE]")
        content, est = self.content()
        stop = STOP_REASONS.get(self.finish, self.finish) if self.finish else None
        return LLMResponse(content, stop, self.usage, self.timing(done), est, 200,
                           {"token_times": self.times, "request_id": request_id})
