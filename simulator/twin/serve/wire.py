"""Anthropic Messages wire shapes for the HTTP twin: SSE events, bodies, error bodies.

Pure functions returning bytes or dicts, so the server's per-step work is a few
`json.dumps` calls joined into one transport write.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from simulator.util import tokens


@dataclass(frozen=True, slots=True)
class ReplyUsage:
    """Token accounting of one reply (Anthropic semantics: the three input fields sum
    to the whole prompt)."""

    prompt_tokens: int
    cached_tokens: int
    block_size: int
    output_tokens: int

    def as_dict(self) -> dict[str, int]:
        """`input_tokens` = the uncached tail not written to cache (a partial block);
        `cache_creation_input_tokens` = uncached tokens in full blocks, which the prefix
        cache now holds; `cache_read_input_tokens` = the prefix-cache hit."""
        bs = max(1, self.block_size)
        full = (self.prompt_tokens // bs) * bs
        creation = max(0, full - self.cached_tokens)
        return {
            "input_tokens": self.prompt_tokens - self.cached_tokens - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
        }


class ReplyFormat(Protocol):
    """What a reply is written in: this module (Messages) or an `openai_wire.ChatWire`."""

    MALFORMED_EVENT: bytes

    def message_start(self, rid: str, model: str, prompt_tokens: int) -> bytes: ...

    def text_delta(self, text: str) -> bytes: ...

    def message_end(self, stop_reason: str, usage: ReplyUsage) -> bytes: ...

    def error_event(self, kind: str = ..., message: str = ...) -> bytes: ...

    def error_body(self, kind: str, message: str) -> dict[str, object]: ...

    def message_body(self, rid: str, model: str, text: str, stop_reason: str,
                     usage: ReplyUsage) -> dict[str, object]: ...


def sse(event: str, data: Mapping[str, object]) -> bytes:
    """One server-sent event (`event:` + `data:` + blank line)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def error_body(kind: str, message: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def message_start(rid: str, model: str, prompt_tokens: int) -> bytes:
    """`message_start` + the text block's start; input_tokens is the whole prompt (as
    vLLM reports it before the cache split is final)."""
    msg: dict[str, object] = {"id": rid, "type": "message", "role": "assistant", "model": model,
           "content": [], "stop_reason": None, "stop_sequence": None,
           "usage": {"input_tokens": prompt_tokens, "output_tokens": 1}}
    return (sse("message_start", {"type": "message_start", "message": msg})
            + sse("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}}))


def text_delta(text: str) -> bytes:
    return sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": text}})


def message_end(stop_reason: str, usage: ReplyUsage) -> bytes:
    """`content_block_stop`, `message_delta` (stop reason, final usage), `message_stop`."""
    delta = {"type": "message_delta",
             "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": usage.as_dict()}
    return (sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            + sse("message_delta", delta)
            + sse("message_stop", {"type": "message_stop"}))


def error_event(kind: str = "overloaded_error", message: str = "Overloaded") -> bytes:
    """The `error` event Anthropic sends after HTTP 200 when a stream fails."""
    return sse("error", error_body(kind, message))


MALFORMED_EVENT = (b'event: content_block_delta\n'
                   b'data: {"type":"content_block_delta","index":0,"delta":{"type":"te\n\n')


def message_body(rid: str, model: str, text: str, stop_reason: str,
                 usage: ReplyUsage) -> dict[str, object]:
    """The non-streaming response body."""
    return {"id": rid, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": stop_reason,
            "stop_sequence": None, "usage": usage.as_dict()}


def token_pieces(ids: Sequence[int]) -> list[str]:
    """Text emitted after each token: bytes are decoded incrementally so a multi-byte
    character split across tokens appears whole with the token that completes it."""
    enc = tokens.encoding()
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = [dec.decode(enc.decode_single_token_bytes(t)) for t in ids]
    tail = dec.decode(b"", final=True)
    if tail and pieces:
        pieces[-1] += tail
    return pieces
