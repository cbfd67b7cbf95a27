"""Wire protocols ("dialects") that `transport.StreamingClient` speaks over any transport.

A dialect says where to POST, which headers and body a request becomes, and gives a
fresh `ReplyState` per attempt that turns body bytes into an `LLMResponse` (the SSE event
grammar, usage, stop reason, per-token times). Two exist: Anthropic Messages
(`anthropic.StreamState`) and OpenAI Chat Completions (`openai_chat.ChatStreamState`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from simulator.endpoints.base import (
    EndpointError,
    ErrorType,
    LLMRequest,
    LLMResponse,
    Timing,
)
from simulator.endpoints.wire import anthropic, openai_chat

Api = Literal["anthropic", "openai-chat"]
APIS: tuple[Api, ...] = ("anthropic", "openai-chat")


class ReplyState(Protocol):
    """One attempt's accumulator (times are the caller's monotonic clock, seconds)."""

    stopped: bool     # the stream's own end (message_stop / [DONE]) was received

    def feed_bytes(self, chunk: bytes, now: float) -> None: ...

    def end_of_body(self, now: float) -> None: ...

    def timing(self, done: float | None) -> Timing: ...

    def failure(self, kind: ErrorType, message: str, status: int | None,
                now: float) -> EndpointError: ...

    def response(self, done: float, request_id: str | None = None) -> LLMResponse: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """What to say: path, headers, body, and the reply accumulator."""

    name: Api
    path: str

    def headers(self, api_key: str) -> dict[str, str]:
        if self.name == "openai-chat":
            return openai_chat.request_headers(api_key)
        return anthropic.request_headers(api_key)

    def body(self, request: LLMRequest) -> bytes:
        if self.name == "openai-chat":
            return openai_chat.stream_body(request)
        return anthropic.stream_body(request)

    def new_state(self, sent: float) -> ReplyState:
        if self.name == "openai-chat":
            return openai_chat.ChatStreamState(sent)
        return anthropic.StreamState(sent)


ANTHROPIC = Dialect("anthropic", "/v1/messages")
OPENAI_CHAT = Dialect("openai-chat", openai_chat.PATH)


def dialect(api: str) -> Dialect:
    """The dialect named `api` (ValueError otherwise)."""
    for d in (ANTHROPIC, OPENAI_CHAT):
        if d.name == api:
            return d
    raise ValueError(f"unknown api {api!r}: expected one of {', '.join(APIS)}")
